package io.netty.contrib.channel.rdma;

import io.netty.buffer.ByteBuf;
import io.netty.contrib.channel.rdma.internal.memory.RegisteredBuffer;
import io.netty.contrib.channel.rdma.internal.memory.RegisteredMemoryPool;
import io.netty.contrib.channel.rdma.internal.protocol.Immediate;
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
 *
 * <p>Ring writes and the slabs of the peer's ring (docs/PROTOCOL.md §3). The last ring write before anything else
 * goes out, and the last of every batch, is sealed: the writer leaves the slab it was filling, so the peer can
 * deliver that slab without waiting for writes that may come much later, and no SEND overtakes a write the peer
 * cannot deliver yet. Where the slab has a window of its own and the queue has room, the write becomes a plain RDMA
 * WRITE followed by a SEAL message sent with {@code SEND_WITH_INV}, which invalidates the slab's window at the peer
 * as it arrives (the peer posts no {@code LOCAL_INV} and waits for none); else the write's immediate gets
 * {@link Immediate#SEAL}. The invalidations of this side's own slabs ({@code LOCAL_INV}) are
 * always signalled, and their completion is reported to the {@link Invalidations}; a failed or flushed one too,
 * since its queue pair is in ERR then and takes no more writes.
 */
final class SendQueue {
    /**
     * Bytes of header memory per send queue slot: a message header, and after it the immediate of a SEAL message
     * ({@link MessageHeader#TYPE_SEAL}).
     */
    static final int HEADER_STRIDE = 16;

    /** Hears of invalidations of this side's ring slabs that completed. */
    interface Invalidations {
        /** The window of {@code slab} of {@code ring} is invalid: the peer cannot write the slab any more. */
        void invalidated(ReceiveRing ring, int slab);
    }

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
    /** The sequence number of the last signalled work request posted; -1 before the first. */
    private long lastSignaled = -1;
    /**
     * When {@link #stalledNanos} last saw the device progress (a completion since its previous look) or owe nothing:
     * the device's silence about work it owes a completion for counts from there. Looked at only by the loop's
     * periodic check, so the data path reads no clock.
     */
    private long progressNanos;
    /** {@link #completed} at the last {@link #stalledNanos} that saw something owed; -1 when nothing was. */
    private long completedAtCheck = -1;
    /** {@link #requestCompletion()} was called: the last work request of every batch is signalled. */
    private boolean signalLast;
    /** The batch index of the last ring write added whose slab the writer has not left, or -1. */
    private int openRingWrite = -1;
    private int openImmediate;
    /** The rkey the open ring write writes through, when its slab has a window of its own; else 0. */
    private int openWindowRkey;
    private boolean openHasWindow;
    private final MessageHeader sealHeader = new MessageHeader();
    /** A SEAL message goes inline on this queue pair (else the immediate seals). */
    private final boolean sealFitsInline;
    /** Told when a ring write gets SEAL: the writer's window leaves the slab. */
    private Runnable sealed = () -> { };
    private Invalidations invalidations;
    /** The ring and slab each send queue slot's LOCAL_INV invalidates, until its completion. */
    private final ReceiveRing[] invalidatedRings;
    private final int[] invalidatedSlabs;

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
        this.sealFitsInline = MessageHeader.LENGTH + MessageHeader.SEAL_PAYLOAD <= maxInline;
        this.alloc = alloc;
        this.pool = alloc.pool();
        this.headerBuf = headerBuf;
        long lkey = RegisteredBuffer.lkey(headerBuf, pool);
        if (lkey == RegisteredBuffer.NOT_REGISTERED) {
            throw new IllegalStateException("the pool of " + alloc + " handed out unregistered memory");
        }
        this.headerLkey = (int) lkey;
        this.headers = MemorySegment.ofAddress(headerBuf.memoryAddress()).reinterpret(headerBytes(depth));
        this.ringPayloadOffset = (long) depth * HEADER_STRIDE;
        this.wrs = wrs;
        this.batchFlags = batchFlags;
        if (maxGather < 2 || maxGather > wrs.maxSge()) {
            throw new IllegalArgumentException("maxGather: " + maxGather + " (expected: 2.." + wrs.maxSge() + ')');
        }
        this.maxGather = maxGather;
        this.inflight = new ByteBuf[depth];
        this.gatheredBySlot = new ByteBuf[depth][];
        this.signalInterval = Math.max(1, Math.min(SIGNAL_INTERVAL, depth / 2));
        this.invalidatedRings = new ReceiveRing[depth];
        this.invalidatedSlabs = new int[depth];
    }

    /** Who is told when a ring write is sealed: the sender's window. */
    void onSeal(Runnable sealed) {
        this.sealed = sealed;
    }

    /** Who is told when an invalidation of this side's slabs completed. */
    void onInvalidated(Invalidations invalidations) {
        this.invalidations = invalidations;
    }

    /** Bytes of header memory a queue of {@code depth} needs. */
    static int headerBytes(int depth) {
        return depth * HEADER_STRIDE + MessageHeader.RING_PAYLOAD;
    }

    /**
     * Seals the open ring write of the batch, if any: the writer leaves its slab. By a SEAL message that invalidates
     * the slab's window ({@code SEND_WITH_INV}) when the slab has a window and the queue and the batch take one more
     * work request besides the one the caller may add; else by the immediate's {@link Immediate#SEAL}. Either way
     * the peer gets one receive completion for the write. Every add but a ring write's seals first; a caller about
     * to count {@link #room()} for several work requests calls it before (the seal may take one).
     */
    void seal() {
        seal(true);
    }

    /** {@link #seal()}; {@code notify}: the writer's window leaves the slab too (not when it has moved on already). */
    private void seal(boolean notify) {
        int i = openRingWrite;
        if (i < 0) {
            return;
        }
        openRingWrite = -1;
        int immediate = openImmediate | Immediate.SEAL;
        if (openHasWindow && sealFitsInline && room() >= 2 && batchRoom() >= 2) {
            wrs.opcode(i, IbvWrOpcode.RDMA_WRITE);
            wrs.immData(i, 0);
            int j = batch;
            int slot = slotOf(posted + j);
            long at = (long) slot * HEADER_STRIDE;
            sealHeader.wrap(headers, at).write(MessageHeader.TYPE_SEAL, 0, 0);
            sealHeader.writeSeal(immediate);
            wrs.set(j, WrId.encode(channelId, WrId.SEND, slot), IbvWrOpcode.SEND_WITH_INV, 0);
            wrs.invalidateRkey(j, openWindowRkey);
            wrs.sgeAddress(j, 0, headers.address() + at, MessageHeader.LENGTH + MessageHeader.SEAL_PAYLOAD,
                    headerLkey);
            batchFlags[j] = IbvSendFlags.INLINE;
            batch++;
        } else {
            wrs.immData(i, immediate);
        }
        if (notify) {
            sealed.run();
        }
    }

    /** Work requests that can still be added before the queue is full (completions make room). */
    int room() {
        return (int) (depth - (posted + batch - completed));
    }

    /** The batch has as many work requests as one doorbell takes: {@link #post()} before adding more. */
    boolean batchFull() {
        return batch == wrs.capacity();
    }

    /** Work requests the batch still takes before {@link #post()}. */
    int batchRoom() {
        return wrs.capacity() - batch;
    }

    /** Whether work requests were added and not yet posted. */
    boolean batching() {
        return batch != 0;
    }

    /**
     * Points {@code header} at the header of the next work request, for the caller to fill and add with
     * {@link #send} or {@link #sendRing}; seals the open ring write first (its SEAL message may take that slot).
     */
    MessageHeader nextHeader(MessageHeader header) {
        seal();
        return header.wrap(headers, (long) slotOf(posted + batch) * HEADER_STRIDE);
    }

    /**
     * Adds a SEND of the header filled through {@link #nextHeader} and {@code length} bytes of {@code payload}
     * ({@code null}: the header only).
     */
    void send(ByteBuf payload, int length) {
        seal();
        int i = batch;
        int slot = slotOf(posted + i);
        wrs.set(i, WrId.encode(channelId, WrId.SEND, slot), IbvWrOpcode.SEND, 0);
        wrs.sgeAddress(i, 0, headers.address() + (long) slot * HEADER_STRIDE, MessageHeader.LENGTH, headerLkey);
        if (payload != null) {
            inflight[slot] = payloadSge(i, 1, payload, length);
        }
        batchFlags[i] = MessageHeader.LENGTH + length <= maxInline ? IbvSendFlags.INLINE : 0;
        batch++;
    }

    /**
     * Adds a RING message: the header filled through {@link #nextHeader}, then the ring's address, size, slabs,
     * flags and the rkey of each slab ({@code slabs} 0: no ring).
     */
    void sendRing(long address, int size, int[] rkeys, int slabs, int flags) {
        seal();
        int i = batch;
        int slot = slotOf(posted + i);
        int payload = ringPayload.wrap(headers, ringPayloadOffset - MessageHeader.LENGTH)
                .writeRing(address, size, rkeys, slabs, flags);
        wrs.set(i, WrId.encode(channelId, WrId.SEND, slot), IbvWrOpcode.SEND, 0);
        wrs.sgeAddress(i, 0, headers.address() + (long) slot * HEADER_STRIDE, MessageHeader.LENGTH, headerLkey);
        wrs.sgeAddress(i, 1, headers.address() + ringPayloadOffset, payload, headerLkey);
        batchFlags[i] = MessageHeader.LENGTH + payload <= maxInline ? IbvSendFlags.INLINE : 0;
        batch++;
    }

    /**
     * Adds the bind of type-2 window {@code mw} over {@code length} bytes at {@code offset} in {@code mr}, with
     * {@code rkey}, granting remote writes on this queue pair.
     */
    void bindWindow(MemoryWindow mw, int rkey, MemoryRegion mr, long offset, long length) {
        seal();
        int i = batch;
        int slot = slotOf(posted + i);
        wrs.set(i, WrId.encode(channelId, WrId.SEND, slot), IbvWrOpcode.BIND_MW, 0);
        wrs.bindMw(i, mw, rkey, mr, offset, length, IbvAccessFlags.REMOTE_WRITE);
        batchFlags[i] = 0;
        batch++;
    }

    /**
     * Adds the invalidation ({@code LOCAL_INV}, signalled) of {@code slab}'s window {@code mw} of this side's
     * {@code ring}; its completion, whatever its status, is reported to the {@link Invalidations}, and it drops a
     * reference to the ring, which the caller took.
     */
    void invalidate(MemoryWindow mw, ReceiveRing ring, int slab) {
        seal();
        int i = batch;
        int slot = slotOf(posted + i);
        wrs.set(i, WrId.encode(channelId, WrId.SEND, slot), IbvWrOpcode.LOCAL_INV, 0);
        wrs.invalidateRkey(i, mw.rkey());
        batchFlags[i] = IbvSendFlags.SIGNALED;
        invalidatedRings[slot] = ring;
        invalidatedSlabs[slot] = slab;
        batch++;
    }

    /**
     * Adds an RDMA WRITE WITH IMMEDIATE into the peer's ring at {@code remoteAddress}; the bytes it carries are
     * added in order with {@link #gather}, up to {@code maxGather} buffers: one message in the peer's ring.
     *
     * @param window whether {@code rkey} is the slab's own window, which a SEAL message may invalidate
     */
    void ringWrite(int immediate, long remoteAddress, int rkey, boolean window) {
        if (openRingWrite >= 0 && Immediate.slab(openImmediate) != Immediate.slab(immediate)) {
            // Leaving the slab by writing into another one (the window has moved on): sealed first, so that the peer
            // need not invalidate it itself.
            seal(false);
        }
        int i = batch;
        wrs.set(i, WrId.encode(channelId, WrId.SEND, slotOf(posted + i)), IbvWrOpcode.RDMA_WRITE_WITH_IMM, 0);
        wrs.immData(i, immediate);
        openRingWrite = i;
        openImmediate = immediate;
        openHasWindow = window;
        openWindowRkey = rkey;
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
        if (batch == 0) {
            return;
        }
        seal(); // may add the SEAL message
        int n = batch;
        int flags = 0;
        int lastSignaledIndex = -1;
        for (int i = 0; i < n; i++) {
            flags = batchFlags[i];
            if ((flags & IbvSendFlags.INLINE) == 0) {
                holding = true;
            }
            if ((flags & IbvSendFlags.SIGNALED) != 0 || ++unsignaled >= signalInterval
                    || i == n - 1 && (holding || signalLast)) {
                flags |= IbvSendFlags.SIGNALED;
                unsignaled = 0;
                holding = false;
            }
            if ((flags & IbvSendFlags.SIGNALED) != 0) {
                lastSignaledIndex = i;
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
        if (lastSignaledIndex >= 0) {
            noteSignaled(first + lastSignaledIndex);
        }
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
        seal();
        postSignaledTail();
    }

    /**
     * Makes the device tell whether the work requests posted unsignalled at the tail have completed: a signalled
     * zero-length RDMA WRITE behind them, once (its completion comes only after theirs). For the progress check:
     * without it a stuck tail of unsignalled sends would owe no completion anybody waits for.
     */
    void probe() {
        if (openRingWrite < 0) {
            postSignaledTail();
        }
    }

    private void postSignaledTail() {
        if (tailSignaled || completed == posted || batch != 0 || room() <= 0) {
            // Signalled already, nothing outstanding, a batch being added that will end signalled, or no room yet.
            return;
        }
        postProbe();
    }

    /**
     * A keepalive probe on a queue with nothing outstanding: a signalled zero-length RDMA WRITE, which the peer's
     * device acknowledges without its software (and without an rkey: nothing is placed). A peer that is gone
     * without a word (a partition, a host that died or hangs) leaves it to the retries, which fail it,
     * {@code RETRY_EXC_ERR}, and the connection with it. Returns whether it was posted.
     */
    boolean probeIdle() {
        if (!idle() || openRingWrite >= 0 || room() <= 0) {
            return false;
        }
        postProbe();
        return true;
    }

    private void postProbe() {
        int slot = slotOf(posted);
        wrs.set(0, WrId.encode(channelId, WrId.SEND, slot), IbvWrOpcode.RDMA_WRITE, IbvSendFlags.SIGNALED);
        qp.postSend(wrs, 0, 1);
        posted++;
        unsignaled = 0;
        holding = false;
        tailSignaled = true;
        noteSignaled(posted - 1);
    }

    /** The signalled work request {@code seq} was posted: a completion is owed for it. */
    private void noteSignaled(long seq) {
        lastSignaled = seq;
    }

    /**
     * How long the device has completed nothing while a signalled work request is outstanding (0 when none is):
     * a peer that answers with RNR NAKs forever, or a path retried without end ({@code retry_cnt} 7 on kernel rxe),
     * keeps it growing; on a live connection it stays within the retry budget.
     */
    long stalledNanos(long now) {
        if (lastSignaled < completed) {
            completedAtCheck = -1;
            return 0;
        }
        if (completed != completedAtCheck) {
            // Owed, and the device completed something since the last look (or owed nothing then): silent from now
            // at most, so a stall is reported between one and two looks late, never early.
            completedAtCheck = completed;
            progressNanos = now;
            return 0;
        }
        return Math.max(0, now - progressNanos);
    }

    /** Whether work requests are outstanding with no signalled one among them ({@link #probe()} asks). */
    boolean unsignaledTail() {
        return lastSignaled < completed && completed < posted;
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
        int status = wcs.status(i);
        release(wcs, i);
        if (status != IbvWcStatus.SUCCESS) {
            throw new IOException("RDMA send failed: " + IbvWcStatus.name(status)
                    + (status == IbvWcStatus.REM_ACCESS_ERR ? " (the peer refused a write into its ring)" : ""));
        }
    }

    /** Releases the buffers of every send up to the one completed by {@code wcs[i]}, whatever its status. */
    void released(WorkCompletions wcs, int i) {
        release(wcs, i);
    }

    private void release(WorkCompletions wcs, int i) {
        int slot = WrId.slot(wcs.wrId(i));
        long seq = completed + Math.floorMod(slot - slotOf(completed), depth);
        for (long s = completed; s <= seq && s < posted; s++) {
            finishInvalidation(slotOf(s), true);
            release(slotOf(s));
        }
        completed = Math.min(seq + 1, posted);
    }

    /**
     * The LOCAL_INV of {@code slot}, if it was one, is done: reported as done ({@code report}: not when the queue
     * pair is gone and the connection with it); its reference goes. Failed or flushed it counts as done too: the
     * queue pair is in ERR then, and the window is bound to it, so no write can land in the slab any more (without
     * that, what arrived before a peer left would wait for an invalidation that never completes, and its channel
     * would never close).
     */
    private void finishInvalidation(int slot, boolean report) {
        ReceiveRing ring = invalidatedRings[slot];
        if (ring == null) {
            return;
        }
        invalidatedRings[slot] = null;
        try {
            if (report && invalidations != null) {
                invalidations.invalidated(ring, invalidatedSlabs[slot]);
            }
        } finally {
            ring.unref();
        }
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

    /** The work requests completed so far. */
    long completedCount() {
        return completed;
    }

    /** No send is waiting for its completion. */
    boolean idle() {
        return completed == posted && batch == 0;
    }

    /** Lets go of every buffer still held and of the header memory; the queue pair must be gone. */
    void release() {
        for (int s = 0; s < inflight.length; s++) {
            finishInvalidation(s, false);
            release(s);
        }
        headerBuf.release();
    }

    @Override
    public String toString() {
        return "SendQueue{posted=" + posted + ", completed=" + completed + ", batch=" + batch + '}';
    }
}
