package io.netty.contrib.channel.rdma;

import io.netty.buffer.ByteBuf;
import io.netty.contrib.channel.rdma.internal.memory.RegisteredBuffer;
import io.netty.contrib.channel.rdma.internal.memory.RegisteredMemoryPool;
import io.netty.contrib.channel.rdma.internal.protocol.MessageHeader;
import io.netty.contrib.channel.rdma.internal.verbs.IbvAccessFlags;
import io.netty.contrib.channel.rdma.internal.verbs.IbvSendFlags;
import io.netty.contrib.channel.rdma.internal.verbs.IbvWcStatus;
import io.netty.contrib.channel.rdma.internal.verbs.IbvWrOpcode;
import io.netty.contrib.channel.rdma.internal.verbs.MemoryRegion;
import io.netty.contrib.channel.rdma.internal.verbs.MemoryWindow;
import io.netty.contrib.channel.rdma.internal.verbs.QueuePair;
import io.netty.contrib.channel.rdma.internal.verbs.SendWorkRequests;
import io.netty.contrib.channel.rdma.internal.verbs.WorkCompletions;

import java.io.IOException;
import java.lang.foreign.MemorySegment;

/**
 * A connection's send queue: the work requests of one call, posted in one doorbell per batch; the buffers they send
 * from, held until their completion; and the message headers, one per send queue slot, in a registered pool buffer.
 * What to send and whether there is credit for it is the connection's business. Loop-thread confined.
 *
 * <p>Signalling. A completion is asked for ({@code IBV_SEND_SIGNALED}) on every {@value #SIGNAL_INTERVAL}th work
 * request (every {@code depth / 2}th in a shallower queue), so that a full queue always has one coming, and on the
 * last of a batch that holds buffers, so that they go back to the pool as soon as they are sent. An inline send holds
 * nothing: the device copied it when it was posted ({@code ibv_post_send(3)}), so its buffer is released then, and
 * a batch of inline sends alone (an echo's reply, a credit update) is posted unsignalled: no completion to make, poll
 * and dispatch per message. Completions come in order, so a signalled one completes every send before it. What needs
 * to know that everything has gone out (a closing channel's linger) calls {@link #requestCompletion()}, which signals
 * from then on and, when the last request posted was unsignalled, posts a signalled zero-length RDMA WRITE behind
 * it: it writes nothing and checks no R_Key (IBA C9-88), and completes after everything before it.
 */
final class SendQueue {
    /** At most this many work requests in a row go unsignalled. */
    private static final int SIGNAL_INTERVAL = 16;

    private final int channelId;
    private final QueuePair qp;
    private final QueueGroup group;
    private final int depth;
    private final int maxInline;
    private final RdmaByteBufAllocator alloc;
    private final RegisteredMemoryPool pool;
    private final ByteBuf headerBuf;
    private final MemorySegment headers;
    private final int headerLkey;
    /** After the headers: the payload of the one RING message that can be in flight. */
    private final long ringPayloadOffset;
    private final SendWorkRequests wrs;
    private final int[] batchFlags;
    /** Buffers a work request may gather from. */
    private final int maxGather;
    /** The buffer each work request sends from (the first, for a gathering ring write), held until its completion. */
    private final ByteBuf[] inflight;
    /**
     * The other buffers of a gathering ring write, by slot: {@code maxGather - 1} each, allocated the first time
     * the slot gathers, so that an idle connection does not pay for them.
     */
    private final ByteBuf[][] gatheredBySlot;
    /** Buffers gathered into the last ring write added. */
    private int gathered;
    private final MessageHeader ringPayload = new MessageHeader();
    private int batch;
    private long posted;
    private long completed;
    private final int signalInterval;
    private int unsignaled;
    /** A work request posted since the last signalled one holds buffers until its completion. */
    private boolean holding;
    /** The last work request posted was signalled (or none was posted). */
    private boolean tailSignaled = true;
    /** {@link #requestCompletion()} was called: the last work request of every batch is signalled. */
    private boolean signalLast;

    /**
     * @param headerBuf a registered buffer of {@link #headerBytes(int)} bytes, released with this queue
     * @param wrs       the loop's work requests, filled and posted within one call of a connection
     * @param maxGather buffers one ring write may gather from: at most the queue pair's {@code max_send_sge} and
     *                  the SGEs of {@code wrs}
     */
    SendQueue(int channelId, QueuePair qp, QueueGroup group, int depth, RdmaByteBufAllocator alloc,
              ByteBuf headerBuf, SendWorkRequests wrs, int[] batchFlags, int maxGather) {
        this.channelId = channelId;
        this.qp = qp;
        this.group = group;
        this.depth = depth;
        this.maxInline = qp.maxInlineData();
        this.alloc = alloc;
        this.pool = alloc.pool();
        this.headerBuf = headerBuf;
        long lkey = RegisteredBuffer.lkey(headerBuf, pool);
        if (lkey == RegisteredBuffer.NOT_REGISTERED) {
            throw new IllegalStateException("the pool of " + alloc + " handed out unregistered memory");
        }
        this.headerLkey = (int) lkey;
        this.headers = MemorySegment.ofAddress(headerBuf.memoryAddress()).reinterpret(headerBytes(depth));
        this.ringPayloadOffset = (long) depth * MessageHeader.LENGTH;
        this.wrs = wrs;
        this.batchFlags = batchFlags;
        if (maxGather < 2 || maxGather > wrs.maxSge()) {
            throw new IllegalArgumentException("maxGather: " + maxGather + " (expected: 2.." + wrs.maxSge() + ')');
        }
        this.maxGather = maxGather;
        this.inflight = new ByteBuf[depth];
        this.gatheredBySlot = new ByteBuf[depth][];
        this.signalInterval = Math.max(1, Math.min(SIGNAL_INTERVAL, depth / 2));
    }

    /** Bytes of header memory a queue of {@code depth} needs. */
    static int headerBytes(int depth) {
        return depth * MessageHeader.LENGTH + MessageHeader.RING_PAYLOAD;
    }

    /** Work requests that can still be added before the queue is full (completions make room). */
    int room() {
        return (int) (depth - (posted + batch - completed));
    }

    /** The batch has as many work requests as one doorbell takes: {@link #post()} before adding more. */
    boolean batchFull() {
        return batch == wrs.capacity();
    }

    /** Whether work requests were added and not yet posted. */
    boolean batching() {
        return batch != 0;
    }

    /** Points {@code header} at the header of the next work request, for the caller to fill. */
    MessageHeader nextHeader(MessageHeader header) {
        return header.wrap(headers, (long) slotOf(posted + batch) * MessageHeader.LENGTH);
    }

    /**
     * Adds a SEND of the header filled through {@link #nextHeader} and {@code length} bytes of {@code payload}
     * ({@code null}: the header only).
     */
    void send(ByteBuf payload, int length) {
        int i = batch;
        int slot = slotOf(posted + i);
        wrs.set(i, WrId.encode(channelId, WrId.SEND, slot), IbvWrOpcode.SEND, 0);
        wrs.sgeAddress(i, 0, headers.address() + (long) slot * MessageHeader.LENGTH, MessageHeader.LENGTH,
                headerLkey);
        if (payload != null) {
            inflight[slot] = payloadSge(i, 1, payload, length);
        }
        batchFlags[i] = MessageHeader.LENGTH + length <= maxInline ? IbvSendFlags.INLINE : 0;
        batch++;
    }

    /** Adds a RING message: the header filled through {@link #nextHeader}, then the ring's address, rkey, size. */
    void sendRing(long address, int rkey, int size) {
        int i = batch;
        int slot = slotOf(posted + i);
        ringPayload.wrap(headers, ringPayloadOffset - MessageHeader.LENGTH).writeRing(address, rkey, size);
        wrs.set(i, WrId.encode(channelId, WrId.SEND, slot), IbvWrOpcode.SEND, 0);
        wrs.sgeAddress(i, 0, headers.address() + (long) slot * MessageHeader.LENGTH, MessageHeader.LENGTH,
                headerLkey);
        wrs.sgeAddress(i, 1, headers.address() + ringPayloadOffset, MessageHeader.RING_PAYLOAD, headerLkey);
        batchFlags[i] = MessageHeader.LENGTH + MessageHeader.RING_PAYLOAD <= maxInline ? IbvSendFlags.INLINE : 0;
        batch++;
    }

    /** Adds the bind of type-2 window {@code mw} over the first {@code length} bytes of {@code mr}, with {@code rkey}. */
    void bindWindow(MemoryWindow mw, int rkey, MemoryRegion mr, long length) {
        int i = batch;
        int slot = slotOf(posted + i);
        wrs.set(i, WrId.encode(channelId, WrId.SEND, slot), IbvWrOpcode.BIND_MW, 0);
        wrs.bindMw(i, mw, rkey, mr, 0, length, IbvAccessFlags.REMOTE_WRITE);
        batchFlags[i] = 0;
        batch++;
    }

    /**
     * Adds an RDMA WRITE WITH IMMEDIATE into the peer's ring at {@code remoteAddress}; the bytes it carries are
     * added in order with {@link #gather}, up to {@code maxGather} buffers: one message in the peer's ring.
     */
    void ringWrite(int immediate, long remoteAddress, int rkey) {
        int i = batch;
        wrs.set(i, WrId.encode(channelId, WrId.SEND, slotOf(posted + i)), IbvWrOpcode.RDMA_WRITE_WITH_IMM, 0);
        wrs.immData(i, immediate);
        wrs.rdma(i, remoteAddress, rkey);
        batchFlags[i] = 0;
        gathered = 0;
        batch++;
    }

    /** Adds {@code length} readable bytes of {@code buf} to the ring write added last. */
    void gather(ByteBuf buf, int length) {
        if (gathered == maxGather) {
            throw new IllegalStateException("a ring write gathers from at most " + maxGather + " buffers");
        }
        int i = batch - 1;
        int j = gathered++;
        int slot = slotOf(posted + i);
        ByteBuf held = payloadSge(i, j, buf, length);
        if (j == 0) {
            inflight[slot] = held;
        } else {
            ByteBuf[] more = gatheredBySlot[slot];
            if (more == null) {
                more = gatheredBySlot[slot] = new ByteBuf[maxGather - 1];
            }
            more[j - 1] = held;
        }
    }

    /** Buffers one ring write may gather from. */
    int maxGather() {
        return maxGather;
    }

    /**
     * Points SGE {@code j} at {@code length} readable bytes of {@code buf}: in place if registered, else a copy.
     * Returns the buffer to hold until the send completes.
     */
    private ByteBuf payloadSge(int i, int j, ByteBuf buf, int length) {
        long lkey = RegisteredBuffer.lkey(buf, pool);
        ByteBuf held;
        long address;
        if (lkey != RegisteredBuffer.NOT_REGISTERED) {
            // The buffer itself, not a slice of it: a reference keeps its memory where it is, and allocates nothing.
            held = buf.retain();
            address = buf.memoryAddress() + buf.readerIndex();
        } else {
            // Heap, composite or foreign memory: one copy into this device's registered pool.
            held = alloc.directBuffer(length, length);
            held.writeBytes(buf, buf.readerIndex(), length);
            lkey = RegisteredBuffer.lkey(held, pool);
            if (lkey == RegisteredBuffer.NOT_REGISTERED) {
                held.release();
                throw new IllegalStateException("the pool of " + alloc + " handed out unregistered memory");
            }
            address = held.memoryAddress();
        }
        wrs.sgeAddress(i, j, address, length, (int) lkey);
        return held;
    }

    /** Posts the batch in one doorbell. */
    void post() {
        int n = batch;
        if (n == 0) {
            return;
        }
        int flags = 0;
        for (int i = 0; i < n; i++) {
            flags = batchFlags[i];
            if ((flags & IbvSendFlags.INLINE) == 0) {
                holding = true;
            }
            if (++unsignaled >= signalInterval || i == n - 1 && (holding || signalLast)) {
                flags |= IbvSendFlags.SIGNALED;
                unsignaled = 0;
                holding = false;
            }
            wrs.sendFlags(i, flags);
        }
        batch = 0;
        // The receives behind the credits these messages grant must be posted before the peer can use them (or be
        // backed by those posted ahead).
        group.beforeSend();
        qp.postSend(wrs, 0, n);
        long first = posted;
        posted += n;
        tailSignaled = (flags & IbvSendFlags.SIGNALED) != 0;
        for (int i = 0; i < n; i++) {
            if ((batchFlags[i] & IbvSendFlags.INLINE) != 0) {
                // Copied into the work request by ibv_post_send: the buffer is free again.
                release(slotOf(first + i));
            }
        }
    }

    /**
     * Makes sure that a completion will come for the last work request posted, so that {@link #idle()} becomes
     * true once everything posted has gone out; from now on the last of every batch is signalled. When that needs a
     * work request and the queue is full, a signalled one is outstanding (at most {@code signalInterval - 1} follow
     * one), and its completion is the moment to call this again.
     */
    void requestCompletion() {
        signalLast = true;
        if (tailSignaled || completed == posted || batch != 0 || room() <= 0) {
            // Signalled already, nothing outstanding, a batch being added that will end signalled, or no room yet.
            return;
        }
        int slot = slotOf(posted);
        wrs.set(0, WrId.encode(channelId, WrId.SEND, slot), IbvWrOpcode.RDMA_WRITE, IbvSendFlags.SIGNALED);
        qp.postSend(wrs, 0, 1);
        posted++;
        unsignaled = 0;
        holding = false;
        tailSignaled = true;
    }

    private int slotOf(long seq) {
        return (int) (seq % depth);
    }

    /**
     * Takes a send completion: every send up to it has completed (completions come in order), so their
     * buffers are released.
     *
     * @throws IOException on an error completion
     */
    void completed(WorkCompletions wcs, int i) throws IOException {
        released(wcs, i);
        int status = wcs.status(i);
        if (status != IbvWcStatus.SUCCESS) {
            throw new IOException("RDMA send failed: " + IbvWcStatus.name(status)
                    + (status == IbvWcStatus.REM_ACCESS_ERR ? " (the peer refused a write into its ring)" : ""));
        }
    }

    /** Releases the buffers of every send up to the one completed by {@code wcs[i]}, whatever its status. */
    void released(WorkCompletions wcs, int i) {
        int slot = WrId.slot(wcs.wrId(i));
        long seq = completed + Math.floorMod(slot - slotOf(completed), depth);
        for (long s = completed; s <= seq && s < posted; s++) {
            release(slotOf(s));
        }
        completed = Math.min(seq + 1, posted);
    }

    /** Releases the buffers that the work request of {@code slot} sent from. */
    private void release(int slot) {
        ByteBuf held = inflight[slot];
        if (held == null) {
            return;
        }
        inflight[slot] = null;
        held.release();
        ByteBuf[] more = gatheredBySlot[slot];
        if (more != null) {
            for (int j = 0; j < more.length && more[j] != null; j++) {
                more[j].release();
                more[j] = null;
            }
        }
    }

    /** No send is waiting for its completion. */
    boolean idle() {
        return completed == posted && batch == 0;
    }

    /** Lets go of every buffer still held and of the header memory; the queue pair must be gone. */
    void release() {
        for (int s = 0; s < inflight.length; s++) {
            release(s);
        }
        headerBuf.release();
    }

    @Override
    public String toString() {
        return "SendQueue{posted=" + posted + ", completed=" + completed + ", batch=" + batch + '}';
    }
}
