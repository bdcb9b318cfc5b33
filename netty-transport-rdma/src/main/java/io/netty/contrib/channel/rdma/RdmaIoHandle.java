package io.netty.contrib.channel.rdma;

import io.netty.channel.IoEvent;
import io.netty.channel.IoHandle;
import io.netty.channel.IoRegistration;
import io.netty.contrib.channel.rdma.internal.verbs.CmEvent;
import io.netty.contrib.channel.rdma.internal.verbs.WorkCompletions;

/**
 * What {@link RdmaIoHandler} drives: a channel's completions and rdma_cm events, called on the loop thread with
 * no object allocated per event. The event and completion are only valid during the call.
 */
interface RdmaIoHandle extends IoHandle {
    void completion(WorkCompletions completions, int index);

    void cmEvent(CmEvent event);

    /** Called once after each batch of completions that reached this handle. */
    void completionBatchDone();

    /**
     * An asynchronous event of the device for the handle's queue pair ({@code IbvEventType}), or for the completion
     * queue, shared receive queue or device it is on.
     */
    void asyncEvent(int type);

    /**
     * The port of the handle's queue pair went down ({@code IBV_EVENT_PORT_ERR} of {@code port} on its device):
     * {@code cause} names it. A handle on another port of the device ignores it.
     */
    void portDown(int port, String cause);

    /**
     * The device whose context is at {@code contextAddress} was removed: a handle with anything on it (an rdma_cm id
     * bound to it, a queue pair) closes now, with {@code cause}, and frees what it has there. Others ignore it.
     */
    void deviceRemoved(long contextAddress, String cause);

    /** Whether the handle still has work in flight after its channel deregistered (a graceful close). */
    boolean lingering();

    /**
     * A periodic look at {@code now}: a handle whose device has owed it a send completion for more than
     * {@code limitNanos} fails ({@link RdmaIoHandlerConfig#sendStallTimeoutMillis}; 0: none fails for it), and an
     * idle one with {@code SO_KEEPALIVE} probes its peer.
     */
    void checkProgress(long now, long limitNanos);

    @Override
    default void handle(IoRegistration registration, IoEvent ioEvent) {
        throw new UnsupportedOperationException("RDMA handles take completions and rdma_cm events directly");
    }
}
