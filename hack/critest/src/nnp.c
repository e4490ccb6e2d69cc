/* Installed setuid root in the nonewprivs test image: prints the effective uid, 0 when
 * privilege escalation is allowed, the caller's uid under no_new_privs. */
#include <stdio.h>
#include <unistd.h>

int main(void)
{
    printf("Effective uid: %u\n", (unsigned)geteuid());
    return 0;
}
