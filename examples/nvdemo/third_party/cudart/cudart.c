/* Source of libdemocudart.so.13, compiled by //tools:prebuilt.bzl when the
 * @demo_cuda repository is fetched. It stands in for a prebuilt vendor
 * library such as libcudart.so.13: the workspace never builds it itself. */
#include "democudart.h"

int democudartRuntimeGetVersion(void) { return DEMOCUDART_VERSION; }

int democudartAdd(int a, int b) { return a + b; }
