/* TCP_NODELAY on every accepted connection, for a server that does not set
 * it: loaded with LD_PRELOAD, accept() and accept4() set it on the socket they
 * return. FalkorDB's Bolt listener writes a reply in several small sends with
 * Nagle's algorithm on: the last send waits for the client's delayed ACK (up to
 * 40 ms on Linux), so any reply of more than a few records took ~40 ms more
 * than its work (benchmarks/findings.md, "Fast server backends"). Neo4j itself
 * sets TCP_NODELAY. Built by bolt-server start (cc -shared -fPIC).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

static int nodelay(int fd) {
    if (fd >= 0) {
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one); /* fails harmlessly on non-TCP sockets */
    }
    return fd;
}

int accept(int fd, struct sockaddr *addr, socklen_t *len) {
    static int (*real)(int, struct sockaddr *, socklen_t *);
    if (!real) real = dlsym(RTLD_NEXT, "accept");
    return nodelay(real(fd, addr, len));
}

int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags) {
    static int (*real)(int, struct sockaddr *, socklen_t *, int);
    if (!real) real = dlsym(RTLD_NEXT, "accept4");
    return nodelay(real(fd, addr, len, flags));
}
