package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;

import static io.netty.contrib.channel.rdma.internal.verbs.Errno.CAPTURE;
import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;

/**
 * Downcall handles for {@code librdmacm.so.1}. Handles that can fail capture errno: their first argument is
 * {@link Errno#state()}; rdma_cm returns -1 and sets errno.
 */
final class LibRdmacm {
    private static final SymbolLookup LOOKUP = NativeLibraries.rdmacm();

    static final MethodHandle RDMA_CREATE_EVENT_CHANNEL = bind("rdma_create_event_channel",
            FunctionDescriptor.of(ADDRESS), true);
    static final MethodHandle RDMA_DESTROY_EVENT_CHANNEL = bind("rdma_destroy_event_channel",
            FunctionDescriptor.ofVoid(ADDRESS), false);
    static final MethodHandle RDMA_GET_DEVICES = bind("rdma_get_devices",
            FunctionDescriptor.of(ADDRESS, ADDRESS), true);
    static final MethodHandle RDMA_FREE_DEVICES = bind("rdma_free_devices",
            FunctionDescriptor.ofVoid(ADDRESS), false);
    static final MethodHandle RDMA_CREATE_ID = bind("rdma_create_id",
            FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS, JAVA_INT), true);
    static final MethodHandle RDMA_DESTROY_ID = bind("rdma_destroy_id",
            FunctionDescriptor.of(JAVA_INT, ADDRESS), true);
    static final MethodHandle RDMA_BIND_ADDR = bind("rdma_bind_addr",
            FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS), true);
    static final MethodHandle RDMA_LISTEN = bind("rdma_listen",
            FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT), true);
    static final MethodHandle RDMA_RESOLVE_ADDR = bind("rdma_resolve_addr",
            FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS, JAVA_INT), true);
    static final MethodHandle RDMA_RESOLVE_ROUTE = bind("rdma_resolve_route",
            FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT), true);
    static final MethodHandle RDMA_CONNECT = bind("rdma_connect",
            FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS), true);
    static final MethodHandle RDMA_ACCEPT = bind("rdma_accept",
            FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS), true);
    static final MethodHandle RDMA_REJECT = bind("rdma_reject",
            FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, JAVA_BYTE), true);
    static final MethodHandle RDMA_INIT_QP_ATTR = bind("rdma_init_qp_attr",
            FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS), true);
    static final MethodHandle RDMA_ESTABLISH = bind("rdma_establish",
            FunctionDescriptor.of(JAVA_INT, ADDRESS), true);
    static final MethodHandle RDMA_DISCONNECT = bind("rdma_disconnect",
            FunctionDescriptor.of(JAVA_INT, ADDRESS), true);
    static final MethodHandle RDMA_GET_CM_EVENT = bind("rdma_get_cm_event",
            FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS), true);
    static final MethodHandle RDMA_ACK_CM_EVENT = bind("rdma_ack_cm_event",
            FunctionDescriptor.of(JAVA_INT, ADDRESS), true);
    static final MethodHandle RDMA_CREATE_QP = bind("rdma_create_qp",
            FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS), true);
    static final MethodHandle RDMA_DESTROY_QP = bind("rdma_destroy_qp",
            FunctionDescriptor.ofVoid(ADDRESS), false);
    static final MethodHandle RDMA_MIGRATE_ID = bind("rdma_migrate_id",
            FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS), true);
    static final MethodHandle RDMA_SET_OPTION = bind("rdma_set_option",
            FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, JAVA_INT, ADDRESS, JAVA_LONG), true);
    static final MethodHandle RDMA_EVENT_STR = bind("rdma_event_str",
            FunctionDescriptor.of(ADDRESS, JAVA_INT), false);
    static final MethodHandle RDMA_GETADDRINFO = bind("rdma_getaddrinfo",
            FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS, ADDRESS), true);
    static final MethodHandle RDMA_FREEADDRINFO = bind("rdma_freeaddrinfo",
            FunctionDescriptor.ofVoid(ADDRESS), false);
    /** Returns the port in network byte order. */
    static final MethodHandle RDMA_GET_SRC_PORT = bind("rdma_get_src_port",
            FunctionDescriptor.of(JAVA_SHORT, ADDRESS), false);
    /** Returns the port in network byte order. */
    static final MethodHandle RDMA_GET_DST_PORT = bind("rdma_get_dst_port",
            FunctionDescriptor.of(JAVA_SHORT, ADDRESS), false);

    private LibRdmacm() {
    }

    private static MethodHandle bind(String name, FunctionDescriptor descriptor, boolean captureErrno) {
        return captureErrno
                ? Downcalls.bind(LOOKUP, NativeLibraries.RDMACM, name, true, descriptor, CAPTURE)
                : Downcalls.bind(LOOKUP, NativeLibraries.RDMACM, name, true, descriptor);
    }
}
