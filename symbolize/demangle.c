/*
 * symbolize/demangle.c — C++ name demangling through libstdc++'s
 * abi::__cxa_demangle (the C ABI entry point, so no C++ compiler is needed).
 *
 * Only Itanium-mangled names ("_Z...") are passed on: __cxa_demangle also
 * accepts bare type encodings, so "i" or "f" (legitimate C function names)
 * would otherwise come back as "int"/"float".
 */
#include <stdlib.h>
#include <string.h>

#include "symbolize/symbolize.h"

extern char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);

char *symbolize_demangle(const char *name)
{
    if (!name || name[0] != '_' || name[1] != 'Z')
        return NULL;
    int status = -1;
    char *out = __cxa_demangle(name, NULL, NULL, &status);
    if (status != 0 || !out) {
        free(out);
        return NULL;
    }
    return out;
}
