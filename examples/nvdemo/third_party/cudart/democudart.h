/* Public header of the fake "CUDA runtime" shipped as @demo_cuda. */
#ifndef DEMOCUDART_H_
#define DEMOCUDART_H_

#define DEMOCUDART_VERSION 13000

#ifdef __cplusplus
extern "C" {
#endif

int democudartRuntimeGetVersion(void);
int democudartAdd(int a, int b);

#ifdef __cplusplus
}
#endif

#endif /* DEMOCUDART_H_ */
