package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.MemorySegment;
import java.util.Objects;

/**
 * A completion queue ({@code struct ibv_cq}). {@link #poll} and {@link #reqNotify} are the inline data-path verbs,
 * called through the context's function pointers without allocating.
 */
public final class CompletionQueue extends NativeObject {
    final VerbsContext context;
    private final CompletionChannel channel;
    private final MemorySegment pollCq;
    private final MemorySegment reqNotifyCq;
    private final long cq;
    private int cqe;
    private int unackedEvents;

    CompletionQueue(MemorySegment cq, VerbsContext context, CompletionChannel channel) {
        super("CompletionQueue", cq.reinterpret(IbvCq.SIZE), context, channel);
        this.context = context;
        this.channel = channel;
        this.pollCq = ContextOps.require(context.ops.pollCq, "poll_cq");
        this.reqNotifyCq = context.ops.reqNotifyCq;
        this.cq = cq.address();
        this.cqe = (int) IbvCq.CQE.get(pointer, 0L);
        if (channel != null) {
            channel.register(this);
        }
    }

    /** The number of entries the device granted (at least what was asked). */
    public int cqe() {
        return cqe;
    }

    /**
     * {@code ibv_resize_cq}: at least {@code entries} entries from now on; completions already queued stay.
     *
     * @throws VerbsException when the device refuses (more than its {@code max_cqe}, or no memory)
     */
    public void resize(int entries) {
        checkOpen();
        try {
            LibIbverbs.check("ibv_resize_cq(" + entries + ")",
                    (int) LibIbverbs.IBV_RESIZE_CQ.invokeExact(Errno.state(), pointer, entries));
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
        cqe = (int) IbvCq.CQE.get(pointer, 0L);
    }

    /** {@code ibv_poll_cq} for up to {@code completions.capacity()} entries; returns how many were written. */
    public int poll(WorkCompletions completions) {
        return poll(completions, completions.capacity());
    }

    /** {@code ibv_poll_cq} for up to {@code max} entries. */
    public int poll(WorkCompletions completions, int max) {
        checkOpen();
        completions.checkOpen();
        Objects.checkFromIndexSize(0, max, completions.capacity());
        int n;
        try {
            n = (int) ContextOps.POLL_CQ.invokeExact(pollCq, cq, max, completions.base);
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
        if (n < 0) {
            throw new VerbsException("ibv_poll_cq", n < -1 ? -n : Errno.EIO, "the CQ may have overrun");
        }
        return n;
    }

    /** {@code ibv_req_notify_cq}: arm the CQ so that its next (solicited) completion signals the channel. */
    public void reqNotify(boolean solicitedOnly) {
        checkOpen();
        if (channel == null) {
            throw new IllegalStateException("the CQ was created without a completion channel");
        }
        int rc;
        try {
            rc = (int) ContextOps.REQ_NOTIFY_CQ.invokeExact(ContextOps.require(reqNotifyCq, "req_notify_cq"), cq,
                    solicitedOnly ? 1 : 0);
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
        if (rc != 0) {
            throw new VerbsException("ibv_req_notify_cq", rc > 0 ? rc : Errno.EIO);
        }
    }

    /** Events received through the channel and not yet acknowledged. */
    public int unackedEvents() {
        return unackedEvents;
    }

    /** {@code ibv_ack_cq_events}: acknowledges {@code n} events received from {@link CompletionChannel}. */
    public void ackEvents(int n) {
        checkOpen();
        if (n < 0 || n > unackedEvents) {
            throw new IllegalArgumentException("n: " + n + " (expected: 0-" + unackedEvents + " unacked events)");
        }
        ack(n);
    }

    void eventReceived() {
        unackedEvents++;
    }

    private void ack(int n) {
        if (n == 0) {
            return;
        }
        try {
            LibIbverbs.IBV_ACK_CQ_EVENTS.invokeExact(pointer, n);
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
        unackedEvents -= n;
    }

    @Override
    void destroy() {
        // ibv_destroy_cq waits until every event it delivered is acknowledged.
        ack(unackedEvents);
        try {
            LibIbverbs.check("ibv_destroy_cq", (int) LibIbverbs.IBV_DESTROY_CQ.invokeExact(Errno.state(), pointer));
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
        if (channel != null) {
            channel.unregister(this);
        }
    }
}
