/* memtouch MIB hot|cold|once|probe|disk [SECONDS]: allocates MIB MiB of anonymous memory and
 * writes every page.
 * hot:   then touches every page again, round after round (a working set that must stay
 *        resident: past the memory limit it thrashes); with SECONDS, only that long (the
 *        clock is read at every page: a round may take minutes when the kernel throttles
 *        it), then it idles as cold;
 * cold:  then sleeps forever, touching nothing (memory that may go to swap and stay there);
 * once:  then exits;
 * probe: a latency probe: every 200 ms touches every page and prints
 *        "probe <epoch ms> <us> <touch us> <fsync us> <read us>": the time from when the
 *        round was due to when it was done (waiting for a CPU and for pages brought back
 *        from swap both count), and how much of it the touch and the disk probe's file
 *        work took (the rest is the wait for the CPU after the timer fired);
 * disk:  the probe of a service that also reads and syncs files: each round also rewrites
 *        64 KiB of ./memtouch.log and fsyncs it, and reads 64 KiB of ./memtouch.dat (16 MiB,
 *        written at the start) after dropping it from the page cache, so the disk is read.
 * It prints "ready" once every page was written. Used by the VM e2e scenarios. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>

static long long ns(clockid_t clock) {
  struct timespec t;
  clock_gettime(clock, &t);
  return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void touch(unsigned char *mem, size_t size, long page, unsigned char round) {
  for (size_t off = 0; off < size; off += page) mem[off] += round;
}

/* Touches round after round until the monotonic clock passes `until` (0: forever). */
static void hot(unsigned char *mem, size_t size, long page, long long until) {
  for (unsigned char round = 1;; round++) {
    for (size_t off = 0; off < size; off += page) {
      if (until && ns(CLOCK_MONOTONIC) >= until) return;
      mem[off] += round;
    }
  }
}

/* One round of file work for the disk probe: a synced write and an uncached read; the ns
 * each took in spent[0] and spent[1]. */
static void file_round(int log, int dat, unsigned char round, long long spent[2]) {
  static unsigned char buf[65536];
  long long t0 = ns(CLOCK_MONOTONIC);
  memset(buf, round, sizeof buf);
  if (pwrite(log, buf, sizeof buf, 0) != (ssize_t)sizeof buf || fsync(log) != 0) perror("memtouch.log");
  long long t1 = ns(CLOCK_MONOTONIC);
  off_t at = (off_t)(round % 256) * sizeof buf;
  posix_fadvise(dat, at, sizeof buf, POSIX_FADV_DONTNEED);
  if (pread(dat, buf, sizeof buf, at) != (ssize_t)sizeof buf) perror("memtouch.dat");
  spent[0] = t1 - t0;
  spent[1] = ns(CLOCK_MONOTONIC) - t1;
}

static int disk_files(int *log, int *dat) {
  static unsigned char buf[65536];
  *log = open("memtouch.log", O_RDWR | O_CREAT | O_TRUNC, 0600);
  *dat = open("memtouch.dat", O_RDWR | O_CREAT | O_TRUNC, 0600);
  if (*log < 0 || *dat < 0) return -1;
  for (int i = 0; i < 256; i++) {
    memset(buf, i, sizeof buf);
    if (write(*dat, buf, sizeof buf) != (ssize_t)sizeof buf) return -1;
  }
  return fsync(*dat);
}

static void probe(unsigned char *mem, size_t size, long page, int disk) {
  int log = -1, dat = -1;
  if (disk && disk_files(&log, &dat) != 0) {
    perror("memtouch disk files");
    exit(1);
  }
  long long due = ns(CLOCK_MONOTONIC);
  for (unsigned char round = 1;; round++) {
    due += 200000000LL;
    struct timespec at = {due / 1000000000LL, due % 1000000000LL};
    clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, NULL);
    long long t0 = ns(CLOCK_MONOTONIC), spent[2] = {0, 0};
    touch(mem, size, page, round);
    long long touched = ns(CLOCK_MONOTONIC) - t0;
    if (disk) file_round(log, dat, round, spent);
    long long late = ns(CLOCK_MONOTONIC) - due;
    printf("probe %lld %lld %lld %lld %lld\n", ns(CLOCK_REALTIME) / 1000000LL, late / 1000LL, touched / 1000LL,
           spent[0] / 1000LL, spent[1] / 1000LL);
    fflush(stdout);
  }
}

int main(int argc, char **argv) {
  if (argc < 3 || argc > 4) {
    fprintf(stderr, "usage: memtouch MIB hot|cold|once|probe|disk [SECONDS]\n");
    return 2;
  }
  size_t size = (size_t)atol(argv[1]) << 20;
  long page = sysconf(_SC_PAGESIZE);
  unsigned char *mem = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    perror("mmap");
    return 1;
  }
  /* Distinct contents per page, so zswap and same-page merging cannot make them free. */
  for (size_t off = 0; off < size; off += page) {
    for (size_t i = 0; i < (size_t)page; i += 64) mem[off + i] = (unsigned char)(off / page + i);
  }
  printf("ready\n");
  fflush(stdout);
  if (strcmp(argv[2], "probe") == 0) probe(mem, size, page, 0);
  if (strcmp(argv[2], "disk") == 0) probe(mem, size, page, 1);
  if (strcmp(argv[2], "hot") == 0) {
    hot(mem, size, page, argc == 4 ? ns(CLOCK_MONOTONIC) + atoll(argv[3]) * 1000000000LL : 0);
    printf("idle\n");
    fflush(stdout);
  }
  if (strcmp(argv[2], "cold") == 0 || strcmp(argv[2], "hot") == 0) {
    for (;;) pause();
  }
  return 0;
}
