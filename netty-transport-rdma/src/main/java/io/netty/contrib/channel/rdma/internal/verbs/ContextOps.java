package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * The data-path verbs of one device context. They are {@code static inline} in {@code <infiniband/verbs.h>} and
 * call through {@code ibv_context.ops}: the pointers are read once here and the calls go through unbound handles.
 * Pointer arguments are passed as {@code long} addresses (same x86_64 calling convention as a pointer), so a call
 * creates no segment objects; none of these calls can block or call back, hence {@code critical}. The memory window
 * verbs ({@code ibv_alloc_mw}, {@code ibv_dealloc_mw}) are inline too but control path: ordinary handles.
 */
final class ContextOps {
    private static final Linker.Option CRITICAL = Linker.Option.critical(false);

    /** {@code int poll_cq(struct ibv_cq *cq, int num_entries, struct ibv_wc *wc)}. */
    static final MethodHandle POLL_CQ = Downcalls.unbound(
            FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_INT, JAVA_LONG), CRITICAL);
    /** {@code int req_notify_cq(struct ibv_cq *cq, int solicited_only)}. */
    static final MethodHandle REQ_NOTIFY_CQ = Downcalls.unbound(
            FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_INT), CRITICAL);
    /** {@code int post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr)}. */
    static final MethodHandle POST_SEND = Downcalls.unbound(
            FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_LONG, JAVA_LONG), CRITICAL);
    /** {@code int post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr)}. */
    static final MethodHandle POST_RECV = Downcalls.unbound(
            FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_LONG, JAVA_LONG), CRITICAL);
    /** {@code int post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr)}. */
    static final MethodHandle POST_SRQ_RECV = Downcalls.unbound(
            FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_LONG, JAVA_LONG), CRITICAL);

    /** {@code struct ibv_mw *alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type)}: NULL and errno on failure. */
    static final MethodHandle ALLOC_MW = Downcalls.unbound(
            FunctionDescriptor.of(ADDRESS, ADDRESS, JAVA_INT), Errno.CAPTURE);
    /** {@code int dealloc_mw(struct ibv_mw *mw)}: 0 or an errno. */
    static final MethodHandle DEALLOC_MW = Downcalls.unbound(FunctionDescriptor.of(JAVA_INT, ADDRESS));

    final MemorySegment allocMw;
    final MemorySegment deallocMw;
    final MemorySegment pollCq;
    final MemorySegment reqNotifyCq;
    final MemorySegment postSend;
    final MemorySegment postRecv;
    final MemorySegment postSrqRecv;

    /** Reads the function pointers of the {@code struct ibv_context} at {@code context}. */
    ContextOps(MemorySegment context) {
        MemorySegment ctx = context.reinterpret(IbvContext.SIZE);
        allocMw = (MemorySegment) IbvContext.OPS_ALLOC_MW.get(ctx, 0L);
        deallocMw = (MemorySegment) IbvContext.OPS_DEALLOC_MW.get(ctx, 0L);
        pollCq = (MemorySegment) IbvContext.OPS_POLL_CQ.get(ctx, 0L);
        reqNotifyCq = (MemorySegment) IbvContext.OPS_REQ_NOTIFY_CQ.get(ctx, 0L);
        postSend = (MemorySegment) IbvContext.OPS_POST_SEND.get(ctx, 0L);
        postRecv = (MemorySegment) IbvContext.OPS_POST_RECV.get(ctx, 0L);
        postSrqRecv = (MemorySegment) IbvContext.OPS_POST_SRQ_RECV.get(ctx, 0L);
    }

    /** Fails early, with the op's name, where the device leaves an op NULL (calling it would crash). */
    static MemorySegment require(MemorySegment function, String name) {
        if (function.address() == 0) {
            throw new UnsupportedOperationException("the device does not implement " + name
                    + " (ibv_context.ops." + name + " is NULL)");
        }
        return function;
    }
}
