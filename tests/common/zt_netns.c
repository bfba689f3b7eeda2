/* Ranks on namespace "hosts": see zt_netns.h. */
#define _GNU_SOURCE
#include "zt_netns.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

#include "zt_launch.h"

static const zt_hosts_t *zt_hosts_cur;

int zt_hosts_parse(zt_hosts_t *h, const char *tag, const char *script, const char *layout)
{
    memset(h, 0, sizeof(*h));
    if (snprintf(h->tag, sizeof(h->tag), "%s", tag) >= (int)sizeof(h->tag) ||
        snprintf(h->script, sizeof(h->script), "%s", script) >= (int)sizeof(h->script)) {
        fprintf(stderr, "zt_hosts: tag '%s' or script '%s' too long\n", tag, script);
        return -1;
    }
    const char *p = layout;
    while (*p != '\0') {
        char *end = NULL;
        long n = strtol(p, &end, 10);
        if (end == p || n < 1 || h->nhosts == ZT_HOSTS_MAX || h->nranks + n > 64 ||
            (*end != ',' && *end != '\0')) {
            fprintf(stderr, "zt_hosts: bad layout '%s'\n", layout);
            return -1;
        }
        for (long i = 0; i < n; i++) {
            h->host_of[h->nranks++] = h->nhosts + 1;
        }
        h->per_host[h->nhosts++] = (int)n;
        p = *end == ',' ? end + 1 : end;
    }
    return h->nhosts > 0 ? 0 : -1;
}

/* Join the namespace bound at path. */
static int zt_ns_join(const char *path, int type)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || setns(fd, type) != 0) {
        fprintf(stderr, "zt_hosts: entering %s: %s\n", path, strerror(errno));
        if (fd >= 0) {
            close(fd);
        }
        return -1;
    }
    close(fd);
    return 0;
}

int zt_hosts_enter(const char *tag, int host)
{
    char path[256];
    snprintf(path, sizeof(path), "/run/netns/%sh%d", tag, host);
    if (zt_ns_join(path, CLONE_NEWNET) != 0) {
        return -1;
    }
    snprintf(path, sizeof(path), "/run/zccl-netns/%s/uts%d", tag, host);
    if (zt_ns_join(path, CLONE_NEWUTS) != 0) {
        return -1;
    }
    snprintf(path, sizeof(path), "/run/zccl-netns/%s/ipc%d", tag, host);
    if (zt_ns_join(path, CLONE_NEWIPC) != 0) {
        return -1;
    }
    /* A private /sys showing this network namespace's interfaces. */
    if (unshare(CLONE_NEWNS) != 0 || mount("none", "/", NULL, MS_SLAVE | MS_REC, NULL) != 0 ||
        umount2("/sys", MNT_DETACH) != 0 || mount("sysfs", "/sys", "sysfs", 0, NULL) != 0) {
        fprintf(stderr, "zt_hosts: remounting /sys in host %d: %s\n", host, strerror(errno));
        return -1;
    }
    return 0;
}

static int zt_hosts_child(int rank)
{
    const zt_hosts_t *h = zt_hosts_cur;
    if (rank >= h->nranks) {
        fprintf(stderr, "zt_hosts: rank %d past the layout's %d ranks\n", rank, h->nranks);
        return -1;
    }
    return zt_hosts_enter(h->tag, h->host_of[rank]);
}

void zt_hosts_use(const zt_hosts_t *h)
{
    zt_hosts_cur = h;
    zt_launch_child_hook = h != NULL ? zt_hosts_child : NULL;
}

int zt_hosts_link(const zt_hosts_t *h, int host, int up)
{
    char cmd[700];
    snprintf(cmd, sizeof(cmd), "'%s' %s %s %d", h->script, up ? "link-up" : "link-down", h->tag,
             host);
    int rc = system(cmd);
    if (rc != 0) {
        fprintf(stderr, "zt_hosts: '%s' returned %d\n", cmd, rc);
        return -1;
    }
    return 0;
}
