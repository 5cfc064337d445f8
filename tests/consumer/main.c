/* Plain C99 against the installed collie.h: one rank, one allreduce. */
#include <collie.h>
#include <stdio.h>

int main(void) {
  collieComm_t comm;
  float x[3] = {1.0f, 2.0f, 3.0f};
  int version = 0;
  if (collieGetVersion(&version) != collieSuccess || version != COLLIE_VERSION_CODE) return 1;
  if (collieCommInitAll(&comm, 1, NULL) != collieSuccess) {
    fprintf(stderr, "init: %s\n", collieGetLastError(NULL));
    return 1;
  }
  if (collieAllReduce(x, x, 3, collieFloat32, collieSum, comm, NULL) != collieSuccess) return 1;
  collieCommDestroy(comm);
  printf("consumer: collie %d, allreduce of one rank gives %g %g %g\n", version, x[0], x[1], x[2]);
  return x[0] == 1.0f && x[1] == 2.0f && x[2] == 3.0f ? 0 : 1;
}
