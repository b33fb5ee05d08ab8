#ifndef CQOSMAP_SHIM_H
#define CQOSMAP_SHIM_H
#include <stddef.h>

/// MNL_SOCKET_BUFFER_SIZE, a macro Swift cannot import.
size_t cqosmap_mnl_socket_buffer_size(void);

#endif
