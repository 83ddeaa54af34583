/*
 * Messages to the user through Open MPI's help mechanism (opal_show_help),
 * from plugin/help-gpuwire.txt installed beside the component. Under mpirun
 * the same message from many processes is printed once, with a count of the
 * others ("N more processes have sent help message help-gpuwire.txt / ...").
 *
 * Open MPI 4.1 and 5.0 look for help files in their data folder
 * (opal_install_dirs.opaldatadir) and in folders added with
 * opal_show_help_add_dir(); the component adds its own folder on first use.
 * Where the help file is missing (a component copied without it), the same
 * text, compiled in (gpuwire_help_topics.h), is printed through opal_output.
 *
 * Use: gw_help(GW_HELP_DECLINED, "pml", why);
 */
#ifndef GPUWIRE_HELP_H
#define GPUWIRE_HELP_H

#include <stdarg.h>
#include <stdio.h>

#include "gpuwire_help_dir.h"
#include "gpuwire_help_topics.h"
#include "opal/constants.h"
#include "opal/util/output.h"
#include "opal/util/show_help.h"

#define GW_HELP_FILE "help-gpuwire.txt"

/* 1 when help-gpuwire.txt is beside this component and its folder is known
 * to Open MPI; decided once per translation unit. */
static inline int gw_help_ready(void)
{
    static int state; /* 0 not yet looked, 1 found, -1 missing */
    if (0 == state) {
        char dir[4096];
        state = -1;
        if (0 == gw_help_dir_of((const void *)gw_help_ready, GW_HELP_FILE, dir, sizeof(dir)) &&
            OPAL_SUCCESS == opal_show_help_add_dir(dir)) {
            state = 1;
        }
    }
    return 1 == state;
}

static inline void gw_help(const char *topic, const char *fallback, ...)
    __attribute__((format(printf, 2, 3)));

/* Prints topic of help-gpuwire.txt, formatted with the arguments; fallback
 * is the same text (GW_HELP_* passes both). */
static inline void gw_help(const char *topic, const char *fallback, ...)
{
    va_list ap;
    int shown = 0;
    if (gw_help_ready()) {
        va_start(ap, fallback);
        shown = OPAL_SUCCESS == opal_show_vhelp(GW_HELP_FILE, topic, 0, ap);
        va_end(ap);
    }
    if (!shown) {
        char line[1024];
        va_start(ap, fallback);
        vsnprintf(line, sizeof(line), fallback, ap);
        va_end(ap);
        opal_output(0, "%s", line);
    }
}

#endif
