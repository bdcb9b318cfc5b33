package io.netty.contrib.channel.rdma;

import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelOutboundBuffer;
import io.netty.channel.EventLoop;
import io.netty.channel.FileRegion;
import io.netty.contrib.channel.rdma.internal.memory.RegisteredBuffer;
import io.netty.contrib.channel.rdma.internal.memory.RegisteredMemoryPool;
import io.netty.contrib.channel.rdma.internal.protocol.ConnectParameters;
import io.netty.contrib.channel.rdma.internal.protocol.Immediate;
import io.netty.contrib.channel.rdma.internal.protocol.MessageHeader;
import io.netty.contrib.channel.rdma.internal.protocol.ProtocolException;
import io.netty.contrib.channel.rdma.internal.protocol.ReceiveWindow;
import io.netty.contrib.channel.rdma.internal.protocol.SendWindow;
import io.netty.contrib.channel.rdma.internal.verbs.CmId;
import io.netty.contrib.channel.rdma.internal.verbs.IbvSendFlags;
import io.netty.contrib.channel.rdma.internal.verbs.IbvWcOpcode;
import io.netty.contrib.channel.rdma.internal.verbs.IbvWcStatus;
import io.netty.contrib.channel.rdma.internal.verbs.IbvWrOpcode;
import io.netty.contrib.channel.rdma.internal.verbs.ProtectionDomain;
import io.netty.contrib.channel.rdma.internal.verbs.QpInitAttributes;
import io.netty.contrib.channel.rdma.internal.verbs.QueuePair;
import io.netty.contrib.channel.rdma.internal.verbs.SendWorkRequests;
import io.netty.contrib.channel.rdma.internal.verbs.WorkCompletions;
import io.netty.util.concurrent.ScheduledFuture;
import io.netty.util.internal.logging.InternalLogger;
import io.netty.util.internal.logging.InternalLoggerFactory;

import java.io.EOFException;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.channels.WritableByteChannel;
import java.util.concurrent.TimeUnit;

/**
 * One connection's data path (docs/PROTOCOL.md): its queue pair, the credits it granted the peer on the loop's
 * shared receive queue ({@link QueueGroup}, {@link ReceiveWindow}), the receive ring it offers while large
 * messages flow ({@link ReceiveRing}), the credits the peer offered ({@link SendWindow}), and the sends in flight.
 * Loop-thread confined.
 *
 * <p>Every message is copied into a buffer of the channel's allocator when it is delivered, and its receive slot
 * or ring space goes back at once: nothing the peer writes later can change what the application holds, and a
 * reader that keeps what it got never holds the peer's credit. With {@link RdmaChannelOption#RECEIVE_ZERO_COPY}
 * a ring write is handed over as a buffer over the ring itself while the buffers the reader holds cover at most
 * half of it; when held buffers pin half the ring, this side registers a new ring and retires the old one, freed
 * once its last buffer is released. Data the channel does not read yet (auto-read off) stays where it landed and
 * its credit is returned only when it is read: the peer then runs out of credit, which is the backpressure.
 */
final class RdmaConnection implements ReceiveRing.Owner {
    private static final InternalLogger logger = InternalLoggerFactory.getInstance(RdmaConnection.class);
    /** A ring that received nothing for this long (and holds nothing) is given back. */
    private static final long RING_IDLE_MILLIS = 1000;
    /** Addresses of receive slots and rings, read without a segment per message. */
    private static final MemorySegment ALL_MEMORY = MemorySegment.NULL.reinterpret(Long.MAX_VALUE);

    /** Where received bytes go: the channel. */
    interface Inbound {
        /** Whether the channel wants more data now. */
        boolean reading();

        /**
         * Up to {@code length} bytes at {@code address}, valid during the call only; returns how many it took
         * (the rest is offered again on the next call).
         */
        int data(long address, int length);

        /** A whole message in a buffer the reader now owns. */
        void buffer(ByteBuf buf);

        /** The peer sent SHUTDOWN: nothing more will come. */
        void shutdown();
    }

    private final int channelId;
    private final RdmaIoHandler handler;
    private final QueueGroup group;
    private final RdmaByteBufAllocator alloc;
    private final RegisteredMemoryPool pool;
    private final ProtectionDomain pd;
    private final EventLoop loop;
    final QueuePair qp;

    // Receive side: credits granted on the shared receive queue, and the ring the peer may write while it has one.
    private final ReceiveWindow credits;
    private final int slotSize;
    /** Bytes of the ring this side offers while large messages flow; 0 when it offers none. */
    private final int ringSize;
    /** No memory windows: rings are plain regions whose rkey works on every QP of the PD (explicitly allowed). */
    private final boolean pdWideRings;
    private final boolean zeroCopy;
    /** The ring the peer writes to now; null when this side offers none. */
    private ReceiveRing ring;
    /** The ring before it, while buffers over it are held or writes to it may still land; else null. */
    private ReceiveRing retired;
    /** The peer may still write to {@link #retired}: it has not yet confirmed the RING that replaced it. */
    private boolean retiredMayReceive;
    /** The immediate's generation bit of writes to the ring offered now (flips with every RING sent). */
    private boolean generation;
    /** The peer has a large write waiting and this side offers no ring: offer one. */
    private boolean ringWanted;
    /** The ring received nothing for a while: withdraw it. */
    private boolean ringIdle;
    private ScheduledFuture<?> ringCheck;
    private long ringArrivalsAtCheck;
    /** Why the last ring registration failed, if it did; no more rings are offered. */
    private RuntimeException ringFailure;
    private boolean creditFlushScheduled;
    private final Runnable creditFlush = () -> {
        creditFlushScheduled = false;
        flushReceives();
    };
    // Received, not yet read: slots in arrival order, with what each holds.
    private final int[] pendingSlots;
    private final byte[] pendingKind;
    private final long[] pendingAddress;
    private final int[] pendingLength;
    private final long[] pendingRingSeq;
    private final ReceiveRing[] pendingRing;
    private int pendingHead;
    private int pendingCount;
    private static final byte KIND_DATA = 1;
    private static final byte KIND_RING = 2;
    private static final byte KIND_SHUTDOWN = 3;
    /** A ring write being copied out in parts. */
    private static final byte KIND_RING_COPY = 4;

    // Send side.
    private final int sqDepth;
    private final SendQueue sends;
    private SendWindow window;
    /**
     * Receive credits the peer granted in messages that arrived before this side saw the connection established
     * (a client's ESTABLISHED event may come after the server's first sends); {@link #start} adds them.
     */
    private int earlyRecvCredits;
    private long peerRingAddress;
    private int peerRingRkey;
    private int peerMaxSend;
    /** Writes up to this size are copied together ({@link RdmaChannelOption#WRITE_COALESCE_THRESHOLD}). */
    private final int coalesceThreshold;
    /** What this connection did ({@link RdmaChannelMetric}). */
    final ConnectionCounters counters = new ConnectionCounters();
    /** Inside {@link #write}: writes' promises complete as their bytes are taken, and a listener may close. */
    private boolean writing;
    private int maxRingWrite;
    private boolean peerRingGeneration;
    /** This side took a RING message of the peer and has not told it yet ({@link MessageHeader#FLAG_RING_SEEN}). */
    private boolean ringSeenOwed;
    private final MessageHeader header = new MessageHeader();
    /** Part of a FileRegion read and waiting for credit to be sent. */
    private ByteBuf fileChunk;
    private boolean released;
    /** Payload bytes handed to the reader and taken from the writer so far (diagnosis: {@link #toString()}). */

    RdmaConnection(RdmaIoHandler.Registration registration, EventLoop loop, CmId id, RdmaDevices.Device device,
                   RdmaChannelConfig config) {
        this.channelId = registration.id();
        this.handler = registration.handler();
        this.loop = loop;
        this.alloc = device.allocator();
        this.pool = alloc.pool();
        this.pd = device.pd();
        this.slotSize = config.getReceiveSlotSize();
        this.sqDepth = config.getSendQueueDepth();
        this.pdWideRings = !device.windows();
        this.ringSize = ringSize(config, device);
        this.zeroCopy = config.isReceiveZeroCopy();
        this.coalesceThreshold = config.getWriteCoalesceThreshold();
        int initialCredits = config.getInitialReceiveCredits();
        int maxCredits = config.getReceiveCredits();
        this.credits = new ReceiveWindow(initialCredits, maxCredits);
        this.group = handler.queueGroup(device, slotSize, sqDepth, initialCredits);
        pendingSlots = new int[maxCredits];
        pendingKind = new byte[maxCredits];
        pendingAddress = new long[maxCredits];
        pendingLength = new int[maxCredits];
        pendingRingSeq = new long[maxCredits];
        pendingRing = new ReceiveRing[maxCredits];
        ByteBuf headers = null;
        QueuePair q = null;
        SendQueue sq = null;
        try {
            headers = alloc.directBuffer(SendQueue.headerBytes(sqDepth), SendQueue.headerBytes(sqDepth));
            q = id.createQp(pd, new QpInitAttributes(group.cq, group.cq, group.srq, sqDepth, 0, 2, 0,
                    config.getMaxInlineData(), false));
            sq = new SendQueue(channelId, q, group, sqDepth, alloc, headers, handler.sendWorkRequests(),
                    handler.batchFlags());
            handler.bindQueuePair(q.qpNum(), registration);
        } catch (RuntimeException e) {
            if (q != null) {
                q.close();
            }
            if (sq != null) {
                sq.release();
            } else if (headers != null) {
                headers.release();
            }
            group.leave(sqDepth, credits.limit(), credits.outstanding() + credits.owed());
            throw e;
        }
        qp = q;
        sends = sq;
    }

    private static volatile boolean loggedNoWindows;

    /**
     * The ring size to offer: the configured one, or 0 (large messages by SEND) on a device without type-2 memory
     * windows, unless the channel accepts rkeys valid on every queue pair of the protection domain.
     */
    private static int ringSize(RdmaChannelConfig config, RdmaDevices.Device device) {
        if (config.getRingSize() == 0 || device.windows()) {
            return config.getRingSize();
        }
        boolean allowed = config.isAllowPdWideRkeys();
        if (!loggedNoWindows) {
            loggedNoWindows = true;
            if (allowed) {
                logger.warn("{} has no type-2 memory windows; RdmaChannelOption.ALLOW_PD_WIDE_RKEYS is set, so receive"
                        + " rings are plain memory regions whose rkey lets any connection of this device write them",
                        device.context());
            } else {
                logger.info("{} has no type-2 memory windows: no receive rings are offered (large messages travel as"
                        + " SENDs); RdmaChannelOption.ALLOW_PD_WIDE_RKEYS accepts rings writable from any connection",
                        device.context());
            }
        }
        return allowed ? config.getRingSize() : 0;
    }

    /** Writes what this side offers the peer. */
    void writeConnectParameters(MemorySegment out) {
        new ConnectParameters().wrap(out).writeHeader()
                .ringAddress(0)
                .ringRkey(0)
                .ringSize(0)
                .recvCredits(credits.outstanding())
                .recvBufferSize(slotSize);
    }

    /** Takes what the peer offered; sending may start. */
    void start(ConnectParameters peer) {
        window = new SendWindow(peer.recvCredits(), peer.ringSize());
        window.grant(earlyRecvCredits, 0);
        earlyRecvCredits = 0;
        peerRingAddress = peer.ringAddress();
        peerRingRkey = peer.ringRkey();
        peerMaxSend = peer.recvBufferSize() - MessageHeader.LENGTH;
        maxRingWrite = peer.ringSize() / 4;
    }

    boolean started() {
        return window != null;
    }

    // ---------------------------------------------------------------- receive

    /**
     * Takes a receive completion. Credits the peer returned count at once; the data waits in
     * {@link #deliver(Inbound)}'s queue.
     *
     * @throws IOException on an error completion or a protocol violation
     */
    void received(WorkCompletions wcs, int i) throws IOException {
        int slot = WrId.slot(wcs.wrId(i));
        long address = group.address(slot);
        boolean queued = false;
        try {
            int status = wcs.status(i);
            if (status != IbvWcStatus.SUCCESS) {
                throw new IOException("RDMA receive failed: " + IbvWcStatus.name(status)
                        + (status == IbvWcStatus.LOC_LEN_ERR ? " (the peer sent more than a receive slot of "
                        + slotSize + " bytes)" : ""));
            }
            // Beyond its grant a message took a receive meant for another peer: freeing its slot posts it again.
            credits.consumed();
            int opcode = wcs.opcode(i);
            if (opcode == IbvWcOpcode.RECV_RDMA_WITH_IMM) {
                int immediate = wcs.immData(i);
                int length = Immediate.length(immediate);
                if (length != wcs.byteLen(i)) {
                    throw new ProtocolException("ring write of " + wcs.byteLen(i) + " bytes announced "
                            + length + " in its immediate");
                }
                ReceiveRing r = ringOf(immediate);
                long seq = r.releases.arrive(immediate);
                r.arrivals++;
                enqueue(slot, KIND_RING, r.memory.address() + r.releases.lastOffset(), length, seq, r);
                queued = true;
                return;
            }
            if (opcode != IbvWcOpcode.RECV) {
                throw new ProtocolException("unexpected receive completion opcode " + opcode);
            }
            int length = wcs.byteLen(i);
            header.wrap(ALL_MEMORY, address).validate(length);
            if (window != null) {
                window.grant(header.recvCredits(), header.ringCredits());
            } else if (header.ringCredits() != 0) {
                throw new ProtocolException("ring credits returned before the connection was established");
            } else {
                earlyRecvCredits += header.recvCredits();
            }
            int flags = header.flags();
            if ((flags & MessageHeader.FLAG_RING_SEEN) != 0) {
                peerLeftRetiredRing();
            }
            if ((flags & MessageHeader.FLAG_WANTS_RING) != 0 && ring == null && ringSize > 0 && ringFailure == null) {
                ringWanted = true;
            }
            switch (header.type()) {
                case MessageHeader.TYPE_DATA -> {
                    enqueue(slot, KIND_DATA, address + MessageHeader.LENGTH, length - MessageHeader.LENGTH, -1, null);
                    queued = true;
                }
                case MessageHeader.TYPE_SHUTDOWN -> {
                    enqueue(slot, KIND_SHUTDOWN, 0, 0, -1, null);
                    queued = true;
                }
                case MessageHeader.TYPE_RING -> peerRingSwitched(header);
                default -> {
                    // CREDIT: nothing to deliver
                }
            }
        } finally {
            if (!queued) {
                freeSlot(slot);
            }
        }
    }

    /** A receive completion nobody will read (the channel is closing): its slot goes back to the shared queue. */
    void dropped(WorkCompletions wcs, int i) {
        int slot = WrId.slot(wcs.wrId(i));
        group.address(slot);
        group.release(slot);
        if (!credits.dropped()) {
            // A flood beyond the grant took receives posted for other peers: give them back.
            group.orphaned();
        }
    }

    /** The slot of a message is free again; its credit is owed to the peer. */
    private void freeSlot(int slot) {
        group.release(slot);
        group.repost();
        int raise = credits.freed(group.room());
        if (raise > 0) {
            group.raise(raise);
        }
    }

    /** The ring a write with this immediate landed in. */
    private ReceiveRing ringOf(int immediate) {
        boolean gen = Immediate.generation(immediate);
        if (ring != null && gen == ring.generation) {
            if (retiredMayReceive) {
                // Writes come in order: nothing more will land in the retired ring.
                peerLeftRetiredRing();
            }
            return ring;
        }
        if (retiredMayReceive && gen == retired.generation) {
            return retired;
        }
        throw new ProtocolException("ring write of generation " + (gen ? 1 : 0)
                + (ring == null ? " while this side offers no ring" : " after the switch to a new ring"));
    }

    /** Nothing more will land in the retired ring: drop the connection's reference. */
    private void peerLeftRetiredRing() {
        if (retiredMayReceive) {
            retiredMayReceive = false;
            // Nobody may write it any more: end remote access now, whatever buffers over it are still held.
            retired.closeWindow();
            unrefRing(retired);
        }
    }

    /** The peer replaced or withdrew its receive ring: later writes go there, or by SEND. */
    private void peerRingSwitched(MessageHeader header) {
        if (window == null) {
            throw new ProtocolException("RING message before the connection was established");
        }
        long size = header.ringSize();
        window.switchRing(size);
        peerRingAddress = header.ringAddress();
        peerRingRkey = header.ringRkey();
        maxRingWrite = (int) (size / 4);
        peerRingGeneration = !peerRingGeneration;
        ringSeenOwed = true;
    }

    private void enqueue(int slot, byte kind, long address, int length, long ringSeq, ReceiveRing r) {
        // The window bounds what can be queued: every queued message used a credit.
        int at = (pendingHead + pendingCount++) % pendingSlots.length;
        pendingSlots[at] = slot;
        pendingKind[at] = kind;
        pendingAddress[at] = address;
        pendingLength[at] = length;
        pendingRingSeq[at] = ringSeq;
        pendingRing[at] = r;
        if (r != null) {
            // Queued bytes keep their ring alive, also when it retires before they are read.
            r.refs.incrementAndGet();
        }
    }

    boolean hasPending() {
        return !released && pendingCount > 0;
    }

    /** Hands queued data to {@code inbound} while it reads; returns how many messages it took. */
    int deliver(Inbound inbound) {
        int delivered = 0;
        // The reader may close the channel, and so release this connection, from inside a callback.
        // A SHUTDOWN with nothing before it is delivered even when the reader is not reading, as a socket reports
        // end of input.
        while (!released && pendingCount > 0 && (pendingKind[pendingHead] == KIND_SHUTDOWN || inbound.reading())) {
            int at = pendingHead;
            byte kind = pendingKind[at];
            ReceiveRing r = pendingRing[at];
            if (kind == KIND_RING && zeroCopy && r == ring && retired == null
                    && r.held + r.releases.span(pendingRingSeq[at]) <= r.size / 2) {
                deliverRingBuffer(inbound, at);
                delivered++;
                continue;
            }
            if (kind != KIND_SHUTDOWN && pendingLength[at] > 0) {
                int n = inbound.data(pendingAddress[at], pendingLength[at]);
                counters.bytesRead += n;
                counters.copies++;
                delivered++;
                if (released) {
                    break;
                }
                pendingAddress[at] += n;
                pendingLength[at] -= n;
                if (pendingLength[at] > 0) {
                    if (kind == KIND_RING) {
                        pendingKind[at] = KIND_RING_COPY;
                    }
                    continue;
                }
            }
            pendingHead = (pendingHead + 1) % pendingSlots.length;
            pendingCount--;
            try {
                if (kind == KIND_SHUTDOWN) {
                    delivered++;
                    inbound.shutdown();
                }
            } finally {
                pendingRing[at] = null;
                // Also when the reader closed the channel meanwhile: the slot belongs to the loop's shared queue.
                freeSlot(pendingSlots[at]);
                if (r != null) {
                    r.releases.release(pendingRingSeq[at]);
                    unrefRing(r);
                }
            }
        }
        return delivered;
    }

    /** Hands the ring write queued at {@code at} to the reader as a buffer over the ring. */
    private void deliverRingBuffer(Inbound inbound, int at) {
        ReceiveRing r = pendingRing[at];
        pendingRing[at] = null;
        pendingHead = (pendingHead + 1) % pendingSlots.length;
        pendingCount--;
        ByteBuf buf = r.heldBuffer(alloc, pendingAddress[at], pendingLength[at], pendingRingSeq[at]);
        counters.bytesRead += pendingLength[at];
        counters.zeroCopyBuffers++;
        freeSlot(pendingSlots[at]);
        unrefRing(r);
        inbound.buffer(buf);
    }

    @Override
    public void ringBufferReleased(ReceiveRing r, long seq) {
        if (!released) {
            r.held -= r.releases.span(seq);
            r.releases.release(seq);
            if (r == ring && !creditFlushScheduled && creditsDue()) {
                // Nothing else may come to carry the credit: a writer waiting for ring space would wait forever.
                creditFlushScheduled = true;
                loop.execute(creditFlush);
            }
        }
        unrefRing(r);
    }

    /** Drops a reference to {@code r}; a retired ring nobody references any more is forgotten. */
    private void unrefRing(ReceiveRing r) {
        r.unref();
        if (r == retired && r.refs.get() == 0) {
            retired = null;
        }
    }

    /** Posts a CREDIT or RING message if the peer needs one. */
    void flushReceives() {
        if (released || window == null || sends.batching()) {
            return;
        }
        // A RING takes two work requests: the window's bind, then the message.
        if (sends.room() > 1 && !retiredMayReceive && (ringOfferDue() || ringIdle && ring != null || ringSwitchDue())
                && window.tryAcquireCreditMessage()) {
            offerRing();
        }
        if (creditsDue() && sends.room() > 0 && window.tryAcquireCreditMessage()) {
            writeHeader(MessageHeader.TYPE_CREDIT, 0);
            sends.send(null, 0);
            sends.post();
        }
    }

    /**
     * Whether to send a CREDIT message now, with no DATA going out to carry the credits: when the receive window
     * says so, when this side owes the peer a {@link MessageHeader#FLAG_RING_SEEN}, or when the peer may be unable
     * to write for want of ring space: its free ring space, as this side knows it, is under half the ring (a write
     * takes at most a quarter plus a skipped tail of at most a quarter). Without the latter, two peers that both
     * write only ring writes (which carry no credits) could each wait for the other's CREDIT.
     */
    private boolean creditsDue() {
        if (ringSeenOwed || credits.due()) {
            return true;
        }
        if (ring == null) {
            return false;
        }
        long owed = ring.releases.owed();
        return owed >= ring.size / 2 || owed > 0 && ring.releases.pinned() + owed >= ring.size / 2;
    }

    private boolean ringOfferDue() {
        return ringWanted && ring == null && ringFailure == null;
    }

    /** Held buffers pin half of the ring (zero-copy delivery): give the peer a new one, so it can go on writing. */
    private boolean ringSwitchDue() {
        return ring != null && retired == null && ringFailure == null && ring.held > 0
                && ring.releases.pinned() >= ring.size / 2;
    }

    /**
     * Sends RING: a new ring (asked for, or replacing one pinned by held buffers), or none (the ring was idle).
     * The current ring retires. Needs send room and a credit, taken by the caller.
     */
    private void offerRing() {
        ReceiveRing next = null;
        if (!ringIdle) {
            try {
                next = ReceiveRing.create(pd, ringSize, pdWideRings, !generation, pendingSlots.length, alloc, loop,
                        this);
            } catch (RuntimeException e) {
                // Without a ring, large messages go on by SEND (or wait for held buffers to be released).
                window.releaseUnused();
                ringFailure = e;
                ringWanted = false;
                logger.warn("could not register a receive ring of {} bytes: large messages go on as SENDs of {} "
                        + "bytes", ringSize, slotSize, e);
                return;
            }
        }
        if (next != null) {
            next.bindWindow(sends);
        }
        sends.nextHeader(header).write(MessageHeader.TYPE_RING, ringSeenFlag(), grantedCredits(), 0);
        sends.sendRing(next == null ? 0 : next.mr.addr(), next == null ? 0 : next.rkey,
                next == null ? 0 : (int) next.size);
        sends.post();
        if (next != null) {
            next.windowBound();
        }
        if (ring != null) {
            // A ring retired before, still alive under held buffers, frees itself when they are released.
            retired = ring;
            retiredMayReceive = true;
        }
        generation = !generation;
        ring = next;
        if (next != null) {
            counters.ringsOffered++;
        } else {
            counters.ringsWithdrawn++;
        }
        ringWanted = false;
        ringIdle = false;
        if (next != null && ringCheck == null) {
            ringCheck = loop.scheduleAtFixedRate(this::checkRingIdle, RING_IDLE_MILLIS, RING_IDLE_MILLIS,
                    TimeUnit.MILLISECONDS);
        } else if (next == null && ringCheck != null) {
            ringCheck.cancel(false);
            ringCheck = null;
        }
    }

    /** A ring that received nothing since the last look and holds nothing is withdrawn: memory follows traffic. */
    private void checkRingIdle() {
        ReceiveRing r = ring;
        if (released || r == null) {
            return;
        }
        if (r.arrivals == ringArrivalsAtCheck && r.releases.outstanding() == 0 && r.held == 0) {
            ringIdle = true;
            flushReceives();
        }
        ringArrivalsAtCheck = r.arrivals;
    }

    // ---------------------------------------------------------------- send

    /**
     * Posts as much of {@code in}'s flushed data as credits and the send queue allow, in one doorbell per batch of
     * work requests.
     *
     * @return {@code true} when everything flushed was posted
     */
    boolean write(ChannelOutboundBuffer in) throws IOException {
        writing = true;
        try {
            for (;;) {
                if (released) {
                    // A promise's listener closed the channel and the connection is gone (its peer left).
                    return true;
                }
                Object msg = in.current();
                if (msg == null) {
                    return true;
                }
                if (msg instanceof FileRegion region) {
                    if (!writeFileChunk(in, region)) {
                        return false;
                    }
                    continue;
                }
                ByteBuf buf = (ByteBuf) msg;
                int readable = buf.readableBytes();
                if (readable == 0) {
                    in.remove();
                    continue;
                }
                if (sends.batchFull()) {
                    sends.post();
                }
                if (sends.room() <= 0) {
                    return false;
                }
                if (readable <= coalesceThreshold && readable <= peerMaxSend && in.size() > 1
                        && worthCoalescing(in)) {
                    if (!coalesce(in)) {
                        return false;
                    }
                    continue;
                }
                int chunk;
                if (readable > peerMaxSend && maxRingWrite > 0) {
                    chunk = Math.min(readable, maxRingWrite);
                    if (!prepareRingWrite(buf, chunk)) {
                        return false;
                    }
                } else {
                    chunk = Math.min(readable, peerMaxSend);
                    // A write larger than a slot and no ring to write it to: ask for one.
                    if (!prepareSend(buf, chunk, readable > peerMaxSend ? MessageHeader.FLAG_WANTS_RING : 0)) {
                        return false;
                    }
                }
                counters.bytesWritten += chunk;
                counters.progressed();
                in.removeBytes(chunk);
            }
        } finally {
            writing = false;
            if (!released) {
                sends.post();
            }
        }
    }

    /**
     * Sends the next part of a {@link FileRegion}: read into registered memory (there is no sendfile for RDMA),
     * then sent like any registered buffer. A part read but not sent for lack of credit waits for the next call.
     */
    private boolean writeFileChunk(ChannelOutboundBuffer in, FileRegion region) throws IOException {
        if (fileChunk == null) {
            long remaining = region.count() - region.transferred();
            if (remaining <= 0) {
                in.remove();
                return true;
            }
            int size = (int) Math.min(remaining, remaining > peerMaxSend && maxRingWrite > 0 ? maxRingWrite
                    : peerMaxSend);
            ByteBuf chunk = alloc.directBuffer(size, size);
            try {
                FileChunkChannel target = new FileChunkChannel(chunk);
                // The region says how far it got: stop there, even if it wrote less than it counted.
                while (chunk.isWritable() && region.transferred() < region.count()) {
                    if (region.transferTo(target, region.transferred()) <= 0) {
                        throw new EOFException("file region of " + region.count() + " bytes ended after "
                                + region.transferred() + " bytes");
                    }
                }
                if (!chunk.isReadable()) {
                    in.remove();
                    chunk.release();
                    return true;
                }
            } catch (IOException | RuntimeException e) {
                chunk.release();
                throw e;
            }
            fileChunk = chunk;
        }
        int length = fileChunk.readableBytes();
        if (sends.batchFull()) {
            sends.post();
        }
        if (sends.room() <= 0) {
            return false;
        }
        boolean prepared = length > peerMaxSend && maxRingWrite > 0 ? prepareRingWrite(fileChunk, length)
                : prepareSend(fileChunk, length, 0);
        if (!prepared) {
            return false;
        }
        fileChunk.release();  // the send holds its own reference until it completes
        fileChunk = null;
        counters.bytesWritten += length;
        counters.progressed();
        in.progress(length);
        if (region.transferred() >= region.count()) {
            in.remove();
        }
        return true;
    }

    /** Where a {@link FileRegion} writes the bytes it reads: the writable part of a buffer. */
    private static final class FileChunkChannel implements WritableByteChannel {
        private final ByteBuf chunk;

        FileChunkChannel(ByteBuf chunk) {
            this.chunk = chunk;
        }

        @Override
        public int write(ByteBuffer src) {
            int n = Math.min(src.remaining(), chunk.writableBytes());
            ByteBuffer part = src.slice(src.position(), n);
            chunk.writeBytes(part);
            src.position(src.position() + n);
            return n;
        }

        @Override
        public boolean isOpen() {
            return true;
        }

        @Override
        public void close() {
        }
    }

    /** Whether the flush starts with two small writes, or with one before a large write that can take it along. */
    private boolean worthCoalescing(ChannelOutboundBuffer in) {
        lookahead.reset();
        try {
            in.forEachFlushedMessage(lookahead);
        } catch (Exception e) {
            throw new IllegalStateException(e); // the processor throws nothing
        }
        return lookahead.smalls >= 2 || lookahead.largeFollows && maxRingWrite > peerMaxSend;
    }

    private final Lookahead lookahead = new Lookahead();

    /** Looks at the first two messages of a flush: small writes, and whether a large one comes after the first. */
    private final class Lookahead implements ChannelOutboundBuffer.MessageProcessor {
        int smalls;
        boolean largeFollows;

        void reset() {
            smalls = 0;
            largeFollows = false;
        }

        @Override
        public boolean processMessage(Object msg) {
            if (msg instanceof ByteBuf buf) {
                int n = buf.readableBytes();
                if (n <= coalesceThreshold && n <= peerMaxSend) {
                    return ++smalls < 2;
                }
                largeFollows = n > peerMaxSend;
            }
            return false;
        }
    }

    /**
     * Copies the small writes at the head of the flush, as many as fit a SEND, into one registered buffer. If a
     * large write follows and the peer's ring has room, they travel at the head of its (first) ring write, two
     * buffers in one work request; otherwise as one SEND. Stops gathering at the first write that is larger than
     * the threshold, does not fit, or is not a buffer: it goes next, in order.
     *
     * @return {@code false} when out of credit (nothing was taken from {@code in})
     */
    private boolean coalesce(ChannelOutboundBuffer in) {
        if (!window.tryAcquireMessage()) {
            counters.stalled();
            return false;
        }
        ByteBuf staging = alloc.directBuffer(peerMaxSend, peerMaxSend);
        try {
            int writes = 0;
            Object next;
            for (;;) {
                next = in.current();
                if (!(next instanceof ByteBuf buf)) {
                    break;
                }
                int n = buf.readableBytes();
                if (n > coalesceThreshold || n > staging.writableBytes()) {
                    break;
                }
                staging.writeBytes(buf, buf.readerIndex(), n);
                // Completes the write's promise, as a post does: the bytes are the connection's now. A listener
                // may close the channel: it lingers while this call writes (sendsDone()), unless the peer is gone.
                in.remove();
                writes++;
                if (released) {
                    return true;
                }
            }
            int head = staging.readableBytes();
            counters.coalescedWrites += writes;
            counters.coalescedSends++;
            counters.progressed();
            if (next instanceof ByteBuf large && large.readableBytes() > peerMaxSend && maxRingWrite > head) {
                int chunk = Math.min(large.readableBytes(), maxRingWrite - head);
                long offset = window.tryReserveRing(head + chunk);
                if (offset >= 0) {
                    sends.ringWrite(staging, head, large, chunk,
                            Immediate.encode(head + chunk, window.lastWrapped(), peerRingGeneration),
                            peerRingAddress + offset, peerRingRkey);
                    counters.bytesWritten += head + chunk;
                    counters.ringWrites++;
                    in.removeBytes(chunk);
                    return true;
                }
            }
            writeHeader(MessageHeader.TYPE_DATA, 0);
            sends.send(staging, head);
            counters.bytesWritten += head;
            counters.sends++;
        } finally {
            staging.release(); // the send holds its own reference until it completes
        }
        return true;
    }

    private boolean prepareSend(ByteBuf buf, int length, int flags) {
        if (!window.tryAcquireMessage()) {
            counters.stalled();
            return false;
        }
        writeHeader(MessageHeader.TYPE_DATA, flags);
        sends.send(buf, length);
        counters.sends++;
        return true;
    }

    private boolean prepareRingWrite(ByteBuf buf, int length) {
        if (!window.tryAcquireMessage()) {
            counters.stalled();
            return false;
        }
        long offset = window.tryReserveRing(length);
        if (offset < 0) {
            window.releaseUnused();
            counters.stalled();
            return false;
        }
        counters.ringWrites++;
        sends.ringWrite(buf, length, Immediate.encode(length, window.lastWrapped(), peerRingGeneration),
                peerRingAddress + offset, peerRingRkey);
        return true;
    }

    /** Posts SHUTDOWN; {@code false} when out of credit or send queue room (retry after completions). */
    boolean shutdownOutput() {
        if (window == null || sends.room() <= 0 || !window.tryAcquireMessage()) {
            return false;
        }
        writeHeader(MessageHeader.TYPE_SHUTDOWN, 0);
        sends.send(null, 0);
        sends.post();
        return true;
    }

    /** Fills the next send's header, with the credits and flags this side owes the peer. */
    private void writeHeader(byte type, int flags) {
        int recvCredits = grantedCredits();
        long ringCredits = ring == null ? 0 : ring.releases.takeOwed();
        sends.nextHeader(header).write(type, flags | ringSeenFlag(), recvCredits, (int) ringCredits);
    }

    /** Credits to put in the next header: committed already, their receives posted before the send goes. */
    private int grantedCredits() {
        return credits.take();
    }

    private int ringSeenFlag() {
        if (ringSeenOwed) {
            ringSeenOwed = false;
            return MessageHeader.FLAG_RING_SEEN;
        }
        return 0;
    }

    /**
     * Takes a send completion: every send up to it has completed (completions come in order), so their
     * buffers are released.
     *
     * @throws IOException on an error completion
     */
    void sent(WorkCompletions wcs, int i) throws IOException {
        sends.completed(wcs, i);
    }

    /** Releases the buffers of every send up to the one completed by {@code wcs[i]}, whatever its status. */
    void released(WorkCompletions wcs, int i) {
        sends.released(wcs, i);
    }

    @Override
    public String toString() {
        return "RdmaConnection{in=" + counters.bytesRead + " B, out=" + counters.bytesWritten + " B, coalesced="
                + counters.coalescedWrites + " writes in " + counters.coalescedSends + " sends, window=" + window
                + ", credits=" + credits + ", " + sends
                + ", pending=" + pendingCount + ", ring=" + ring
                + ", retired=" + retired + ", retiredMayReceive=" + retiredMayReceive + ", group=" + group
                + ", released=" + released + '}';
    }

    /**
     * No send is waiting for its completion, and none is being prepared: a channel closed from a promise listener
     * while {@link #write} runs lingers until what that call posts has gone out.
     */
    boolean sendsDone() {
        return !writing && sends.idle();
    }

    /** Destroys the queue pair: no more DMA into this connection's memory, no more completions. */
    void destroyQueuePair() {
        // Windows go first: on kernel rxe a bound window holds its queue pair.
        if (ring != null) {
            ring.closeWindow();
        }
        if (retired != null) {
            retired.closeWindow();
        }
        if (qp != null) {
            handler.unbindQueuePair(qp.qpNum());
            qp.close();
        }
    }

    /** Frees everything; call {@link #destroyQueuePair()} first. Idempotent. */
    void release() {
        if (released) {
            return;
        }
        released = true;
        if (ringCheck != null) {
            ringCheck.cancel(false);
            ringCheck = null;
        }
        if (fileChunk != null) {
            fileChunk.release();
            fileChunk = null;
        }
        sends.release();
        for (; pendingCount > 0; pendingCount--) {
            group.release(pendingSlots[pendingHead]);
            if (pendingRing[pendingHead] != null) {
                pendingRing[pendingHead].unref();
            }
            pendingRing[pendingHead] = null;
            pendingHead = (pendingHead + 1) % pendingSlots.length;
        }
        if (ring != null) {
            ring.unref();
        }
        if (retired != null && retiredMayReceive) {
            retired.unref();
        }
        group.leave(sqDepth, credits.limit(), credits.outstanding() + credits.owed());
    }
}
