/*
 * zccl_config: print the environment table (the one in common/zc/config.h).
 *   zccl_config             values in force, from the current environment
 *   zccl_config --markdown  the README's table
 *   zccl_config --version   zccl's version and the ACL interface version
 *   zccl_config --help      this usage
 * The table is the process's one copy, in libascendcl.
 */
#include <stdio.h>
#include <string.h>

#include "acl/acl.h"
#include "zc/config.h"
#include "zccl/version.h"

static void zccl_config_usage(FILE *out, const char *prog)
{
    fprintf(out,
            "usage: %s [--markdown | --version | --help]\n"
            "  (no option)  print zccl's environment variables with the values in force\n"
            "  --markdown   print the table of variables, defaults and meanings as Markdown\n"
            "  --version    print zccl's version and the ACL interface version it implements\n"
            "  --help       print this text\n",
            prog);
}

static int zccl_config_version(void)
{
    int32_t major = 0;
    int32_t minor = 0;
    int32_t patch = 0;
    if (aclrtGetVersion(&major, &minor, &patch) != ACL_SUCCESS) {
        fprintf(stderr, "zccl_config: aclrtGetVersion failed\n");
        return 1;
    }
    printf("zccl_config (zccl) %s, ACL interface %d.%d.%d\n", ZCCL_VERSION_STRING, (int)major,
           (int)minor, (int)patch);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 2) {
        zccl_config_usage(stderr, argv[0]);
        return 2;
    }
    const char *opt = argc > 1 ? argv[1] : "";
    if (strcmp(opt, "--help") == 0 || strcmp(opt, "-h") == 0) {
        zccl_config_usage(stdout, argv[0]);
        return 0;
    }
    if (strcmp(opt, "--version") == 0) {
        return zccl_config_version();
    }
    int markdown = strcmp(opt, "--markdown") == 0;
    if (!markdown && opt[0] != '\0') {
        fprintf(stderr, "%s: unknown option '%s'\n", argv[0], opt);
        zccl_config_usage(stderr, argv[0]);
        return 2;
    }
    if (!markdown) {
        (void)zc_config();
    }
    zc_config_print(stdout, markdown);
    return 0;
}
