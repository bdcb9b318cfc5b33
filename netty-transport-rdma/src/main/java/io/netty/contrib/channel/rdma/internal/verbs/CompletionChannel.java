package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * A completion event channel ({@code struct ibv_comp_channel}): its fd becomes readable when an armed CQ gets a
 * completion. {@link #getCqEvent()} returns the CQ; acknowledge with {@link CompletionQueue#ackEvents(int)}.
 */
public final class CompletionChannel extends NativeObject {
    final VerbsContext context;
    private final Arena arena = Arena.ofShared();
    private final MemorySegment cqOut = arena.allocate(ADDRESS);
    private final MemorySegment cqContextOut = arena.allocate(ADDRESS);
    private final Map<Long, CompletionQueue> cqs = new ConcurrentHashMap<>();
    private volatile CompletionQueue lastCq;

    CompletionChannel(MemorySegment channel, VerbsContext context) {
        super("CompletionChannel", channel.reinterpret(IbvCompChannel.SIZE), context);
        this.context = context;
    }

    /** The pollable fd. */
    public int fd() {
        checkOpen();
        return (int) IbvCompChannel.FD.get(pointer, 0L);
    }

    /** In non-blocking mode {@link #getCqEvent()} returns {@code null} instead of waiting. */
    public void setNonBlocking(boolean nonBlocking) {
        Libc.setNonBlocking(fd(), nonBlocking);
    }

    /** Waits up to {@code timeoutMillis} for an event to be pending; {@code true} if one is. */
    public boolean await(int timeoutMillis) {
        return Libc.awaitReadable(fd(), timeoutMillis);
    }

    /**
     * {@code ibv_get_cq_event}: the CQ that has completions (re-arm it with {@link CompletionQueue#reqNotify}),
     * or {@code null} if none is pending in non-blocking mode.
     */
    public CompletionQueue getCqEvent() {
        checkOpen();
        try {
            // Without errno capture first (it allocates); when that fails, again with it to learn why: nothing was
            // consumed, so the second call fails the same way (or finds an event that arrived meanwhile).
            int rc = (int) LibIbverbs.IBV_GET_CQ_EVENT_NO_ERRNO.invokeExact(pointer, cqOut, cqContextOut);
            if (rc != 0) {
                MemorySegment state = Errno.state();
                rc = (int) LibIbverbs.IBV_GET_CQ_EVENT.invokeExact(state, pointer, cqOut, cqContextOut);
                if (rc != 0 && Errno.get(state) == Errno.EAGAIN) {
                    return null;
                }
                LibIbverbs.check("ibv_get_cq_event", rc);
            }
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
        long address = cqOut.get(JAVA_LONG, 0);
        CompletionQueue cq = lastCq;
        if (cq == null || cq.address() != address) {
            // One CQ per channel is the usual case: look it up (boxing the key) only when it changes.
            cq = cqs.get(address);
            lastCq = cq;
        }
        if (cq == null) {
            throw new IllegalStateException("ibv_get_cq_event returned a CQ this channel does not know");
        }
        cq.eventReceived();
        return cq;
    }

    void register(CompletionQueue cq) {
        cqs.put(cq.address(), cq);
    }

    void unregister(CompletionQueue cq) {
        if (lastCq == cq) {
            lastCq = null;
        }
        cqs.remove(cq.address());
    }

    @Override
    void destroy() {
        try {
            LibIbverbs.check("ibv_destroy_comp_channel",
                    (int) LibIbverbs.IBV_DESTROY_COMP_CHANNEL.invokeExact(Errno.state(), pointer));
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
        arena.close();
    }
}
