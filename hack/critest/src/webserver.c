/* A small HTTP server standing in for the nginx and httpd test images. Every request gets
 * "200 OK" and a short page. Named by the file it runs from:
 *   nginx  re-executes itself once with the command line "nginx: master process ARGS", as
 *          nginx shows itself, and writes its pid to /var/run/nginx.pid;
 *   httpd  logs a line naming itself on stderr at start.
 * LISTEN_ADDR (default 0.0.0.0) and LISTEN_PORT (default 80) choose the socket. SIGTERM,
 * SIGINT and SIGQUIT end it with status 0. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

static const char page[] = "<html><body><h1>It works!</h1></body></html>\n";
static const char title[] = "nginx: master process";

static void leave(int sig) { (void)sig; _exit(0); }

static void reap(int sig)
{
    int saved = errno;
    (void)sig;
    while (waitpid(-1, NULL, WNOHANG) > 0)
        ;
    errno = saved;
}

/* The name of the executable, from /proc/self/exe; the path goes to exe. */
static const char *own_name(char *exe, size_t size, const char *argv0)
{
    ssize_t n = readlink("/proc/self/exe", exe, size - 1);
    const char *slash;

    if (n <= 0)
        n = (ssize_t)snprintf(exe, size, "%s", argv0);
    exe[n < (ssize_t)size ? n : (ssize_t)size - 1] = '\0';
    slash = strrchr(exe, '/');
    return slash ? slash + 1 : exe;
}

static void retitle_as_nginx(int argc, char **argv, const char *exe)
{
    char line[4096];
    size_t used;
    int i;

    if (strncmp(argv[0], title, strlen(title)) == 0)
        return;
    used = (size_t)snprintf(line, sizeof(line), "%s", title);
    for (i = 0; i < argc && used < sizeof(line); i++)
        used += (size_t)snprintf(line + used, sizeof(line) - used, " %s", argv[i]);
    execv(exe, (char *[]){line, NULL});
    fprintf(stderr, "nginx: re-exec of %s failed: %s\n", exe, strerror(errno));
}

static void write_pid(const char *path)
{
    FILE *f;

    mkdir("/var", 0755);
    mkdir("/var/run", 0755);
    f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "nginx: %s: %s\n", path, strerror(errno));
        return;
    }
    fprintf(f, "%d\n", (int)getpid());
    fclose(f);
}

static void answer(int conn, const char *name)
{
    struct timeval limit = {5, 0};
    char request[8192], head[256];
    size_t got = 0;
    ssize_t n;
    int len;

    setsockopt(conn, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
    while (got < sizeof(request) - 1) {
        n = read(conn, request + got, sizeof(request) - 1 - got);
        if (n <= 0)
            break;
        got += (size_t)n;
        request[got] = '\0';
        if (strstr(request, "\r\n\r\n") || strstr(request, "\n\n"))
            break;
    }
    request[got] = '\0';
    len = snprintf(head, sizeof(head),
                   "HTTP/1.1 200 OK\r\nServer: %s\r\nContent-Type: text/html\r\n"
                   "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                   name, sizeof(page) - 1);
    if (write(conn, head, (size_t)len) == len && strncmp(request, "HEAD ", 5) != 0)
        (void)!write(conn, page, sizeof(page) - 1);
    request[strcspn(request, "\r\n")] = '\0';
    printf("%s: \"%s\" 200\n", name, request);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    char exe[4096];
    const char *name = own_name(exe, sizeof(exe), argv[0]);
    const char *addr = getenv("LISTEN_ADDR"), *port = getenv("LISTEN_PORT");
    struct sockaddr_in sin = {.sin_family = AF_INET};
    struct sigaction sa = {0};
    int s, one = 1;

    if (strcmp(name, "nginx") == 0) {
        retitle_as_nginx(argc, argv, exe);
        write_pid("/var/run/nginx.pid");
    }
    sa.sa_handler = leave;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGQUIT, &sa, NULL);
    sa.sa_handler = reap;
    sa.sa_flags = SA_NOCLDSTOP | SA_RESTART;
    sigaction(SIGCHLD, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    if (!addr || !*addr)
        addr = "0.0.0.0";
    sin.sin_port = htons((unsigned short)(port && *port ? atoi(port) : 80));
    if (inet_pton(AF_INET, addr, &sin.sin_addr) != 1) {
        fprintf(stderr, "%s: LISTEN_ADDR %s is not an IPv4 address\n", name, addr);
        return 1;
    }
    s = socket(AF_INET, SOCK_STREAM, 0);
    if (s < 0 || setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
        bind(s, (struct sockaddr *)&sin, sizeof(sin)) < 0 || listen(s, 64) < 0) {
        fprintf(stderr, "%s: listening on %s:%u: %s\n", name, addr, ntohs(sin.sin_port), strerror(errno));
        return 1;
    }
    fprintf(stderr, "%s: test web server, pid %d, on %s:%u\n", name, (int)getpid(), addr, ntohs(sin.sin_port));
    for (;;) {
        int conn = accept(s, NULL, NULL);
        if (conn < 0)
            continue;
        answer(conn, name);
        close(conn);
    }
}
