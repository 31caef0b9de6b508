/* Calls both prebuilt libraries. It passes once it runs at all: the failure
 * this example reproduces happens before main(), in the dynamic loader. */
#include <stdio.h>

#include "democudart.h"
#include "demoinfer.h"

int main(void) {
  int cudart = democudartRuntimeGetVersion();
  int infer = demoinferGetVersion();
  int result = demoinferRun(20);
  printf("democudart %d, demoinfer %d, demoinferRun(20) = %d\n", cudart, infer, result);
  if (cudart != DEMOCUDART_VERSION || infer != DEMOINFER_VERSION || result != 42) {
    fprintf(stderr, "FAIL: unexpected values\n");
    return 1;
  }
  return 0;
}
