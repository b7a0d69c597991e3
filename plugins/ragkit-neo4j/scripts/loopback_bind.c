/* Loopback only, for a server that has no bind option: loaded with
 * LD_PRELOAD, bind() to the wildcard address (0.0.0.0, or :: for IPv6)
 * binds to the loopback address instead. FalkorDB's Bolt listener binds ::
 * (every interface, IPv4 included); ::ffff:127.0.0.1 keeps the IPv4 clients
 * of 127.0.0.1 and takes no connection from another host. Every other bind
 * passes unchanged. Built by bolt-server start (cc -shared -fPIC).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

int bind(int fd, const struct sockaddr *addr, socklen_t len) {
    static int (*real)(int, const struct sockaddr *, socklen_t);
    if (!real) real = dlsym(RTLD_NEXT, "bind");
    if (addr && addr->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
        struct sockaddr_in in;
        memcpy(&in, addr, sizeof in);
        if (in.sin_addr.s_addr == htonl(INADDR_ANY)) {
            in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            return real(fd, (const struct sockaddr *)&in, sizeof in);
        }
    } else if (addr && addr->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
        struct sockaddr_in6 in6;
        memcpy(&in6, addr, sizeof in6);
        if (memcmp(&in6.sin6_addr, &in6addr_any, sizeof in6addr_any) == 0) {
            /* ::ffff:127.0.0.1: IPv4 clients of 127.0.0.1 reach it, as they reached [::] */
            static const unsigned char mapped[16] = {0,0,0,0,0,0,0,0,0,0,0xff,0xff,127,0,0,1};
            memcpy(&in6.sin6_addr, mapped, sizeof mapped);
            return real(fd, (const struct sockaddr *)&in6, sizeof in6);
        }
    }
    return real(fd, addr, len);
}
