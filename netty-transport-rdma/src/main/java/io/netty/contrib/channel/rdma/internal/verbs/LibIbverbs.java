package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;

import static io.netty.contrib.channel.rdma.internal.verbs.Errno.CAPTURE;
import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * Downcall handles for the exported functions of {@code libibverbs.so.1} (the data-path verbs are inline in the
 * header and go through {@link ContextOps}). Handles that can fail capture errno: their first argument is
 * {@link Errno#state()}. The control-path helpers below turn failures into {@link VerbsException}s.
 */
final class LibIbverbs {
    private static final SymbolLookup LOOKUP = NativeLibraries.ibverbs();

    static final MethodHandle IBV_GET_DEVICE_LIST = required("ibv_get_device_list",
            FunctionDescriptor.of(ADDRESS, ADDRESS), true);
    static final MethodHandle IBV_FREE_DEVICE_LIST = required("ibv_free_device_list",
            FunctionDescriptor.ofVoid(ADDRESS), false);
    static final MethodHandle IBV_GET_DEVICE_NAME = required("ibv_get_device_name",
            FunctionDescriptor.of(ADDRESS, ADDRESS), false);
    static final MethodHandle IBV_GET_DEVICE_GUID = required("ibv_get_device_guid",
            FunctionDescriptor.of(JAVA_LONG, ADDRESS), false);
    static final MethodHandle IBV_OPEN_DEVICE = required("ibv_open_device",
            FunctionDescriptor.of(ADDRESS, ADDRESS), true);
    static final MethodHandle IBV_CLOSE_DEVICE = required("ibv_close_device",
            FunctionDescriptor.of(JAVA_INT, ADDRESS), true);
    static final MethodHandle IBV_QUERY_DEVICE = required("ibv_query_device",
            FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS), true);
    static final MethodHandle IBV_QUERY_PORT = required("ibv_query_port",
            FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_BYTE, ADDRESS), true);
    static final MethodHandle IBV_QUERY_GID = required("ibv_query_gid",
            FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_BYTE, JAVA_INT, ADDRESS), true);
    static final MethodHandle IBV_QUERY_PKEY = required("ibv_query_pkey",
            FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_BYTE, JAVA_INT, ADDRESS), true);
    static final MethodHandle IBV_ALLOC_PD = required("ibv_alloc_pd",
            FunctionDescriptor.of(ADDRESS, ADDRESS), true);
    static final MethodHandle IBV_DEALLOC_PD = required("ibv_dealloc_pd",
            FunctionDescriptor.of(JAVA_INT, ADDRESS), true);
    static final MethodHandle IBV_REG_MR = required("ibv_reg_mr",
            FunctionDescriptor.of(ADDRESS, ADDRESS, ADDRESS, JAVA_LONG, JAVA_INT), true);
    static final MethodHandle IBV_REG_MR_IOVA2 = Downcalls.bind(LOOKUP, NativeLibraries.IBVERBS,
            "ibv_reg_mr_iova2", false,
            FunctionDescriptor.of(ADDRESS, ADDRESS, ADDRESS, JAVA_LONG, JAVA_LONG, JAVA_INT), CAPTURE);
    static final MethodHandle IBV_DEREG_MR = required("ibv_dereg_mr",
            FunctionDescriptor.of(JAVA_INT, ADDRESS), true);
    static final MethodHandle IBV_CREATE_COMP_CHANNEL = required("ibv_create_comp_channel",
            FunctionDescriptor.of(ADDRESS, ADDRESS), true);
    static final MethodHandle IBV_DESTROY_COMP_CHANNEL = required("ibv_destroy_comp_channel",
            FunctionDescriptor.of(JAVA_INT, ADDRESS), true);
    static final MethodHandle IBV_GET_CQ_EVENT = required("ibv_get_cq_event",
            FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS), true);
    /**
     * The same without errno capture, for the event loop's wait: a capturing call allocates (a slice of the
     * capture segment, see {@link Errno}); {@link CompletionChannel#getCqEvent()} captures only after a failure.
     */
    static final MethodHandle IBV_GET_CQ_EVENT_NO_ERRNO = required("ibv_get_cq_event",
            FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS), false);
    static final MethodHandle IBV_ACK_CQ_EVENTS = required("ibv_ack_cq_events",
            FunctionDescriptor.ofVoid(ADDRESS, JAVA_INT), false);
    static final MethodHandle IBV_CREATE_CQ = required("ibv_create_cq",
            FunctionDescriptor.of(ADDRESS, ADDRESS, JAVA_INT, ADDRESS, ADDRESS, JAVA_INT), true);
    static final MethodHandle IBV_RESIZE_CQ = required("ibv_resize_cq",
            FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT), true);
    static final MethodHandle IBV_DESTROY_CQ = required("ibv_destroy_cq",
            FunctionDescriptor.of(JAVA_INT, ADDRESS), true);
    static final MethodHandle IBV_CREATE_QP = required("ibv_create_qp",
            FunctionDescriptor.of(ADDRESS, ADDRESS, ADDRESS), true);
    static final MethodHandle IBV_MODIFY_QP = required("ibv_modify_qp",
            FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, JAVA_INT), true);
    static final MethodHandle IBV_QUERY_QP = required("ibv_query_qp",
            FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, JAVA_INT, ADDRESS), true);
    static final MethodHandle IBV_DESTROY_QP = required("ibv_destroy_qp",
            FunctionDescriptor.of(JAVA_INT, ADDRESS), true);
    static final MethodHandle IBV_CREATE_SRQ = required("ibv_create_srq",
            FunctionDescriptor.of(ADDRESS, ADDRESS, ADDRESS), true);
    static final MethodHandle IBV_MODIFY_SRQ = required("ibv_modify_srq",
            FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, JAVA_INT), true);
    static final MethodHandle IBV_DESTROY_SRQ = required("ibv_destroy_srq",
            FunctionDescriptor.of(JAVA_INT, ADDRESS), true);
    static final MethodHandle IBV_GET_ASYNC_EVENT = required("ibv_get_async_event",
            FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS), true);
    static final MethodHandle IBV_ACK_ASYNC_EVENT = required("ibv_ack_async_event",
            FunctionDescriptor.ofVoid(ADDRESS), false);
    static final MethodHandle IBV_WC_STATUS_STR = required("ibv_wc_status_str",
            FunctionDescriptor.of(ADDRESS, JAVA_INT), false);

    private LibIbverbs() {
    }

    private static MethodHandle required(String name, FunctionDescriptor descriptor, boolean captureErrno) {
        return captureErrno
                ? Downcalls.bind(LOOKUP, NativeLibraries.IBVERBS, name, true, descriptor, CAPTURE)
                : Downcalls.bind(LOOKUP, NativeLibraries.IBVERBS, name, true, descriptor);
    }

    /** Throws a {@link VerbsException} if {@code rc} is non-zero (a positive errno, or -1 with errno set). */
    static void check(String call, int rc) {
        if (rc != 0) {
            throw new VerbsException(call, rc > 0 ? rc : Errno.last());
        }
    }

    /** Throws a {@link VerbsException} with the captured errno if {@code pointer} is NULL; returns it otherwise. */
    static MemorySegment checkPointer(String call, MemorySegment pointer) {
        if (pointer.address() == 0) {
            int errno = Errno.last();
            throw new VerbsException(call, errno == 0 ? Errno.EINVAL : errno);
        }
        return pointer;
    }

    /** Rethrows what a downcall handle threw (only unchecked exceptions are possible). */
    static RuntimeException rethrow(Throwable t) {
        if (t instanceof RuntimeException e) {
            throw e;
        }
        if (t instanceof Error e) {
            throw e;
        }
        throw new IllegalStateException(t);
    }
}
