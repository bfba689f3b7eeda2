/*
 * zccl_config: print the environment table (the one in common/zc/config.h).
 *   zccl_config            values in force, from the current environment
 *   zccl_config --markdown the README's table
 */
#include <stdio.h>
#include <string.h>

#include "zc/config.h"

int main(int argc, char **argv)
{
    int markdown = argc > 1 && strcmp(argv[1], "--markdown") == 0;
    if (!markdown) {
        (void)zc_config();
    }
    zc_config_print(stdout, markdown);
    return 0;
}
