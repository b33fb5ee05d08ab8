#include <bpf/libbpf.h>
#include <bpf/bpf.h>
