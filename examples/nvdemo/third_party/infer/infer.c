/* Source of libdemoinfer.so.11, compiled by //tools:prebuilt.bzl when the
 * @demo_tensorrt repository is fetched. Like libnvinfer needs libcudart, it
 * calls into libdemocudart, so it is linked with DT_NEEDED
 * libdemocudart.so.13 -- a library from the *other* external repository. */
#include "demoinfer.h"
#include "democudart.h"

int demoinferGetVersion(void) { return DEMOINFER_VERSION; }

int demoinferRun(int x) { return democudartAdd(x, 1) * 2; }
