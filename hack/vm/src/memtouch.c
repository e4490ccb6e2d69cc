/* memtouch MIB hot|cold|once: allocates MIB MiB of anonymous memory and writes every page.
 * hot: then touches every page again, round after round, forever (a working set that must
 *      stay resident: past the memory limit it thrashes);
 * cold: then sleeps forever, touching nothing (memory that may go to swap and stay there);
 * once: then exits.
 * It prints "ready" once every page was written. Used by the VM e2e scenarios. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: memtouch MIB hot|cold|once\n");
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
  if (strcmp(argv[2], "hot") == 0) {
    for (unsigned long round = 1;; round++) {
      for (size_t off = 0; off < size; off += page) mem[off] += (unsigned char)round;
    }
  }
  if (strcmp(argv[2], "cold") == 0) {
    for (;;) pause();
  }
  return 0;
}
