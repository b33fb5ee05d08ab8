#include <bpf/libbpf.h>
#include <bpf/bpf.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

// libbpf's message formatted whole, in memory from malloc (the caller frees
// it), or NULL. In C because Swift cannot va_copy, and the length must be
// measured before the message is written: a verifier log can be megabytes.
static inline char *qosmap_vformat(const char *format, va_list args) {
    va_list copy;
    va_copy(copy, args);
    int n = vsnprintf(NULL, 0, format, copy);
    va_end(copy);
    if (n < 0) return NULL;
    char *s = malloc((size_t)n + 1);
    if (s) vsnprintf(s, (size_t)n + 1, format, args);
    return s;
}
