/* Public header of the fake "inference library" shipped as @demo_tensorrt. */
#ifndef DEMOINFER_H_
#define DEMOINFER_H_

#define DEMOINFER_VERSION 11000

#ifdef __cplusplus
extern "C" {
#endif

int demoinferGetVersion(void);
/* Returns (x + 1) * 2, computed with democudartAdd() from libdemocudart. */
int demoinferRun(int x);

#ifdef __cplusplus
}
#endif

#endif /* DEMOINFER_H_ */
