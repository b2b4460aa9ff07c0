/* The pod sandbox's process for the real test node (tests/k8s/realnode.py): it holds the
 * pod's namespaces, reaps orphans and exits on SIGINT/SIGTERM. Built here with
 * `gcc -static` into the pause image (tests/k8s/oci.py); the role of Kubernetes'
 * registry.k8s.io/pause, which no test may download. */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void down(int sig) { (void)sig; exit(0); }

static void reap(int sig) {
  (void)sig;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
}

int main(void) {
  struct sigaction stop = {.sa_handler = down};
  struct sigaction child = {.sa_handler = reap, .sa_flags = SA_NOCLDSTOP};
  if (sigaction(SIGINT, &stop, NULL) < 0 || sigaction(SIGTERM, &stop, NULL) < 0 ||
      sigaction(SIGCHLD, &child, NULL) < 0) {
    return 1;
  }
  for (;;) {
    pause();
  }
}
