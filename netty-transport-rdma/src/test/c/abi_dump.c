/*
 * Prints the size of every struct and the offset and size of every field the Java bindings lay out,
 * compiled against the installed rdma-core headers. The list comes from the Java layouts themselves:
 * StructLayoutTest generates abi_fields.h (STRUCT/FIELD lines) next to the binary and compares the output.
 *
 * Output lines:  "<struct> <size>",  "<struct>.<field.path> <offset> <size>"  and  "<CONSTANT> <value>".
 */
#include <stddef.h>
#include <stdio.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#define STRUCT(type, name) printf("%s %zu\n", name, sizeof(type));
#define FIELD(type, name, path) \
    printf("%s.%s %zu %zu\n", name, #path, offsetof(type, path), sizeof(((type *)0)->path));
#define CONST(name) printf("%s %lld\n", #name, (long long)(name));

int main(void)
{
#include "abi_fields.h"
    return 0;
}
