/* The pod sandbox process of the test images: it waits for SIGTERM or SIGINT and exits 0.
 * As PID 1 of a pod's PID namespace it also reaps the orphans handed to it. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

int main(int argc, char **argv)
{
    sigset_t wanted;
    int sig = 0;

    if (argc > 1 && strcmp(argv[1], "-v") == 0) {
        puts("pause 3.10 (swapcri test image)");
        return 0;
    }
    /* Block the signals and take them synchronously: no handler races. */
    sigemptyset(&wanted);
    sigaddset(&wanted, SIGTERM);
    sigaddset(&wanted, SIGINT);
    sigaddset(&wanted, SIGCHLD);
    sigprocmask(SIG_BLOCK, &wanted, NULL);
    for (;;) {
        if (sigwait(&wanted, &sig) != 0)
            continue;
        if (sig == SIGCHLD) {
            while (waitpid(-1, NULL, WNOHANG) > 0)
                ;
            continue;
        }
        return 0;
    }
}
