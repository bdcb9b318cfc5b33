package io.netty.contrib.channel.rdma;

import io.netty.channel.AbstractChannel;
import io.netty.channel.Channel;
import io.netty.channel.ChannelPromise;
import io.netty.channel.EventLoop;
import io.netty.channel.IoEventLoop;
import io.netty.channel.IoRegistration;
import io.netty.contrib.channel.rdma.internal.protocol.RejectReason;
import io.netty.contrib.channel.rdma.internal.verbs.CmEvent;
import io.netty.contrib.channel.rdma.internal.verbs.CmId;
import io.netty.contrib.channel.rdma.internal.verbs.WorkCompletions;
import io.netty.util.internal.logging.InternalLogger;
import io.netty.util.internal.logging.InternalLoggerFactory;

/**
 * What {@link RdmaChannel} and {@link RdmaServerChannel} share: a registration on an {@link RdmaIoHandler} loop,
 * whose handle is the channel's unsafe, and the rdma_cm events and completions the loop hands it. All on the loop
 * thread.
 */
abstract class AbstractRdmaChannel extends AbstractChannel {
    private static final InternalLogger logger = InternalLoggerFactory.getInstance(AbstractRdmaChannel.class);

    IoRegistration ioRegistration;
    /** The loop's view of this channel: its handler (rdma_cm channel, queue groups) and its id in work requests. */
    RdmaIoHandler.Registration registration;

    AbstractRdmaChannel(Channel parent) {
        super(parent);
    }

    @Override
    protected boolean isCompatible(EventLoop loop) {
        return loop instanceof IoEventLoop l && l.isCompatible(AbstractRdmaUnsafe.class);
    }

    @Override
    protected void doRegister(ChannelPromise promise) {
        ((IoEventLoop) eventLoop()).register((AbstractRdmaUnsafe) unsafe()).addListener(f -> {
            if (!f.isSuccess()) {
                promise.setFailure(f.cause());
                return;
            }
            ioRegistration = (IoRegistration) f.getNow();
            registration = ioRegistration.attachment();
            registered(promise);
        });
    }

    /** The loop has taken the channel. Completes the registration; an accepted channel completes it later. */
    void registered(ChannelPromise promise) {
        promise.setSuccess();
    }

    @Override
    protected void doDeregister() {
        IoRegistration r = ioRegistration;
        if (r != null) {
            r.cancel();
        }
    }

    /** Refuses a connection request; a failure is not news (the peer may be gone), so it is only logged. */
    static void reject(CmId id, int reason) {
        try {
            id.reject(RejectReason.encode(reason));
        } catch (RuntimeException e) {
            logger.debug("rdma_reject failed", e);
        }
    }

    abstract void onCmEvent(CmEvent event);

    /** A completion of the channel's queue pair; a listener has none. */
    void onCompletion(WorkCompletions completions, int index) {
    }

    /** Called once after each batch of completions that reached this channel. */
    void onCompletionBatchDone() {
    }

    /** An asynchronous event of the device for the channel's queue pair (see {@link RdmaIoHandle#asyncEvent}). */
    void onAsyncEvent(int type) {
    }

    /** The port of the channel's queue pair went down (see {@link RdmaIoHandle#portDown}). */
    void onPortDown(int port, String cause) {
    }

    /** The device at {@code contextAddress} was removed (see {@link RdmaIoHandle#deviceRemoved}). */
    void onDeviceRemoved(long contextAddress, String cause) {
    }

    /** A periodic look at the channel's send progress (see {@link RdmaIoHandle#checkProgress}). */
    void onProgressCheck(long now, long limitNanos) {
    }

    /** Whether the channel, closed, still waits for sends in flight (see {@link RdmaIoHandle#lingering()}). */
    boolean isLingering() {
        return false;
    }

    /** The loop is shutting down: close now, without waiting for anything in flight. */
    void closeNow() {
        unsafe().close(unsafe().voidPromise());
    }

    /** The handle the loop drives: it passes the loop's events to the channel. */
    abstract class AbstractRdmaUnsafe extends AbstractUnsafe implements RdmaIoHandle {
        @Override
        public void completion(WorkCompletions completions, int index) {
            onCompletion(completions, index);
        }

        @Override
        public void cmEvent(CmEvent event) {
            onCmEvent(event);
        }

        @Override
        public void completionBatchDone() {
            onCompletionBatchDone();
        }

        @Override
        public void asyncEvent(int type) {
            onAsyncEvent(type);
        }

        @Override
        public void portDown(int port, String cause) {
            onPortDown(port, cause);
        }

        @Override
        public void deviceRemoved(long contextAddress, String cause) {
            onDeviceRemoved(contextAddress, cause);
        }

        @Override
        public boolean lingering() {
            return isLingering();
        }

        @Override
        public void checkProgress(long now, long limitNanos) {
            onProgressCheck(now, limitNanos);
        }

        @Override
        public void close() {
            closeNow();
        }

        /** The channel's, so that the loop's messages about a handle name the connection. */
        @Override
        public String toString() {
            return AbstractRdmaChannel.this.toString();
        }
    }
}
