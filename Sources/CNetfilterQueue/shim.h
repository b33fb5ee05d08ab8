#include <stdint.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <netinet/in.h> /* before linux/netfilter.h: libc-compat then skips the kernel copies of in.h */
#include <linux/netfilter.h>
#include <libnetfilter_queue/libnetfilter_queue.h>
#include <linux/netfilter/nfnetlink_queue.h>
