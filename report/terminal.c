/*
 * report/terminal.c — the text report on a terminal: its width
 * (TIOCGWINSZ, else $COLUMNS) and lines wider than it wrapped at spaces under
 * their value column. The table's own cells shrink in table.c (fit_columns);
 * output to files and pipes is never touched.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "report/report.h"
#include "report/report_internal.h"

void report_print_wrapped(FILE *out, const char *first, const char *rest, const char *text, unsigned columns)
{
    const char *indent = first;
    for (;;) {
        size_t width = columns > report_text_width(indent) + 20 ? columns - report_text_width(indent) : 0;
        size_t len = strlen(text);
        if (!width || report_text_width(text) <= width) {
            fprintf(out, "%s%s\n", indent, text);
            return;
        }
        /* the last space at or before `width` characters (bytes of UTF-8
         * continuation do not count) */
        size_t cut = 0, chars = 0;
        for (size_t i = 0; i < len && chars <= width; i++) {
            if (text[i] == ' ')
                cut = i;
            if (((unsigned char)text[i] & 0xC0) != 0x80)
                chars++;
        }
        if (cut == 0) { /* one long word: up to the next space */
            const char *sp = strchr(text, ' ');
            cut = sp ? (size_t)(sp - text) : len;
        }
        fprintf(out, "%s%.*s\n", indent, (int)cut, text);
        text += cut;
        while (*text == ' ')
            text++;
        if (!*text)
            return;
        indent = rest;
    }
}

void report_write_fitted(FILE *out, const char *text, size_t len, unsigned columns)
{
    const char *end = text + len;
    char indent[64];
    while (text < end) {
        const char *nl = memchr(text, '\n', (size_t)(end - text));
        size_t n = nl ? (size_t)(nl - text) : (size_t)(end - text);
        char *line = strndup(text, n);
        if (!line) { /* out of memory: the line as it is */
            fwrite(text, 1, n, out);
            fputc('\n', out);
        } else if (report_text_width(line) <= columns) {
            fprintf(out, "%s\n", line);
        } else {
            /* Hanging indent: a "label   value" line continues under its
             * value, a "* finding" under its text, anything else 4 in. */
            size_t lead = strspn(line, " "), at = lead + 4;
            const char *gap = strstr(line + lead, "  ");
            if (strncmp(line + lead, "* ", 2) == 0)
                at = lead + 2;
            else if (gap && gap[strspn(gap, " ")])
                at = (size_t)(gap - line) + strspn(gap, " ");
            if (at > columns / 2 || at >= sizeof indent)
                at = lead + 4 < sizeof indent ? lead + 4 : 4;
            memset(indent, ' ', at);
            indent[at] = '\0';
            report_print_wrapped(out, "", indent, line, columns);
        }
        free(line);
        text += n + (nl ? 1 : 0);
    }
}

unsigned report_terminal_columns(int fd)
{
    if (!isatty(fd))
        return 0;
    struct winsize ws;
    if (ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
        return ws.ws_col;
    const char *env = getenv("COLUMNS");
    long c = env ? strtol(env, NULL, 10) : 0;
    return c > 0 && c < 100000 ? (unsigned)c : 80;
}
