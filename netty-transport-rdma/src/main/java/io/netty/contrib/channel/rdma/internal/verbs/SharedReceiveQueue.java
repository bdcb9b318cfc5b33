package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

import static java.lang.foreign.ValueLayout.JAVA_LONG;

/** A shared receive queue ({@code struct ibv_srq}); {@link #postRecv} is the inline {@code ibv_post_srq_recv}. */
public final class SharedReceiveQueue extends NativeObject {
    private static final int IBV_SRQ_LIMIT = 1 << 1;

    final ProtectionDomain pd;
    private final MemorySegment postSrqRecvFn;
    private final long srq;
    private final int maxWr;
    private final int maxSge;

    SharedReceiveQueue(MemorySegment srq, ProtectionDomain pd, int maxWr, int maxSge) {
        super("SharedReceiveQueue", srq.reinterpret(IbvSrq.SIZE), pd);
        this.pd = pd;
        this.postSrqRecvFn = pd.context.ops.postSrqRecv;
        this.srq = srq.address();
        this.maxWr = maxWr;
        this.maxSge = maxSge;
    }

    /** Granted number of outstanding receive requests. */
    public int maxWr() {
        return maxWr;
    }

    public int maxSge() {
        return maxSge;
    }

    /** {@code ibv_modify_srq(IBV_SRQ_LIMIT)}: arm the limit event (async {@code IBV_EVENT_SRQ_LIMIT_REACHED}). */
    public void armLimit(int srqLimit) {
        checkOpen();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment attr = arena.allocate(IbvSrqAttr.LAYOUT);
            IbvSrqAttr.SRQ_LIMIT.set(attr, 0L, srqLimit);
            LibIbverbs.check("ibv_modify_srq(limit " + srqLimit + ")",
                    (int) LibIbverbs.IBV_MODIFY_SRQ.invokeExact(Errno.state(), pointer, attr, IBV_SRQ_LIMIT));
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
    }

    /** {@code ibv_post_srq_recv} of requests {@code first .. first + count - 1} of {@code wrs}. */
    public void postRecv(RecvWorkRequests wrs, int first, int count) {
        checkOpen();
        long head = wrs.chain(first, count);
        wrs.badWr.set(JAVA_LONG, 0, 0L);
        int rc;
        try {
            rc = (int) ContextOps.POST_SRQ_RECV.invokeExact(ContextOps.require(postSrqRecvFn, "post_srq_recv"), srq,
                    head, wrs.badWr.address());
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
        if (rc != 0) {
            throw QueuePair.postFailure("ibv_post_srq_recv", rc, wrs.indexOf(wrs.badWr.get(JAVA_LONG, 0)));
        }
    }

    @Override
    void destroy() {
        try {
            LibIbverbs.check("ibv_destroy_srq", (int) LibIbverbs.IBV_DESTROY_SRQ.invokeExact(Errno.state(), pointer));
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
    }
}
