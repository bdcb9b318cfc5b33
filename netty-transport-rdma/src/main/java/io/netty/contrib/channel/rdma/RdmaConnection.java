package io.netty.contrib.channel.rdma;

import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelOutboundBuffer;
import io.netty.channel.EventLoop;
import io.netty.contrib.channel.rdma.internal.protocol.ConnectParameters;
import io.netty.contrib.channel.rdma.internal.protocol.Immediate;
import io.netty.contrib.channel.rdma.internal.protocol.MessageHeader;
import io.netty.contrib.channel.rdma.internal.protocol.ProtocolException;
import io.netty.contrib.channel.rdma.internal.protocol.ReceiveWindow;
import io.netty.contrib.channel.rdma.internal.protocol.RingSlabs;
import io.netty.contrib.channel.rdma.internal.verbs.CmId;
import io.netty.contrib.channel.rdma.internal.verbs.IbvWcOpcode;
import io.netty.contrib.channel.rdma.internal.verbs.IbvWcStatus;
import io.netty.contrib.channel.rdma.internal.verbs.ProtectionDomain;
import io.netty.contrib.channel.rdma.internal.verbs.QpInitAttributes;
import io.netty.contrib.channel.rdma.internal.verbs.QueuePair;
import io.netty.contrib.channel.rdma.internal.verbs.WorkCompletions;
import io.netty.util.concurrent.ScheduledFuture;
import io.netty.util.internal.SystemPropertyUtil;
import io.netty.util.internal.logging.InternalLogger;
import io.netty.util.internal.logging.InternalLoggerFactory;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.TimeUnit;

/**
 * One connection's data path (docs/PROTOCOL.md): its queue pair; on the receive side the credits it granted the
 * peer on the loop's shared receive queue ({@link QueueGroup}, {@link ReceiveWindow}), the messages received and
 * not yet read ({@link ReceivedQueue}) and the receive rings it offers while large messages flow
 * ({@link OfferedRings}); on the send side the writes turned into work requests within the peer's credits
 * ({@link Sender}) and the sends in flight ({@link SendQueue}). It dispatches completions between them and sends
 * the CREDIT and RING messages the receive side owes. Loop-thread confined.
 *
 * <p>A SEND's payload is copied into a buffer of the channel's allocator when it is delivered, and its receive slot
 * goes back at once; one of at least a quarter of a slot ({@link #LEND_SLOT_SHARE}) is handed over as a buffer over
 * the slot itself instead ({@link RdmaChannelOption#RECEIVE_ZERO_COPY}, the default), the slot lent to the reader
 * until it releases the buffer ({@link QueueGroup#lend}), while the loop's lent slots stay under their limit. A ring
 * write is delivered only once the window of its slab is invalidated (the peer left the slab;
 * {@link #flushReceives()} posts the {@code LOCAL_INV}), as a buffer over the ring itself
 * ({@link RdmaChannelOption#RECEIVE_ZERO_COPY}, the default) while the reader holds buffers over at most half of the
 * ring's slabs, else as a copy; a slab released by the reader is bound again and returned to the peer. So nothing
 * the peer writes later can change what the application holds, and a reader that keeps what it got never stops the
 * peer. Data the channel does not read yet (auto-read off) stays where it landed and its credit is returned only
 * when it is read: the peer then runs out of credit, which is the backpressure.
 */
final class RdmaConnection implements ReceiveRing.Owner, Sender.Owed, SendQueue.Invalidations {
    private static final InternalLogger logger = InternalLoggerFactory.getInstance(RdmaConnection.class);
    private static final RefusalLog RING_FAILURES = new RefusalLog(logger, "receive rings");
    /** A ring that received nothing for this long (and holds nothing) is given back. */
    private static final long RING_IDLE_MILLIS = 1000;
    /** Addresses of receive slots and rings, read without a segment per message. */
    private static final MemorySegment ALL_MEMORY = MemorySegment.NULL.reinterpret(Long.MAX_VALUE);
    /**
     * A SEND's payload of at least a slot divided by this is lent to the reader in its slot, not copied: a 4 KiB
     * copy out of a slot another core just filled cost the in-process echo about 0.2 µs a message. Smaller ones are
     * copied, which is cheap for them and keeps a held message from pinning a whole slot.
     */
    static final int LEND_SLOT_SHARE = 4;

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

    private final RdmaIoHandler handler;
    private final QueueGroup group;
    private final RdmaByteBufAllocator alloc;
    private final EventLoop loop;
    final QueuePair qp;

    // Receive side: credits granted on the shared receive queue, what arrived and waits to be read, and the rings
    // the peer may write while large messages flow.
    private final ReceiveWindow credits;
    private final int slotSize;
    /** Bytes of the ring this side offers while large messages flow; 0 when it offers none. */
    private final int ringSize;
    private final boolean zeroCopy;
    /** The device is kernel rxe, which flags a receive's invalidation its own way ({@link WorkCompletions#hasInv}). */
    private final boolean kernelRxe;
    /** Its allocator decides: buffers over the ring are the transport's, so an allocator of the application's copies. */
    private final RdmaChannelConfig config;
    private final ReceivedQueue received;
    private final OfferedRings rings;
    private ScheduledFuture<?> ringCheck;
    private boolean creditFlushScheduled;
    private final Runnable creditFlush = () -> {
        creditFlushScheduled = false;
        flushReceives();
    };
    private final MessageHeader header = new MessageHeader();

    // Send side.
    private final int sqDepth;
    private final SendQueue sends;
    private final Sender sender;
    /** What this connection did ({@link RdmaChannelMetric}). */
    final ConnectionCounters counters = new ConnectionCounters();
    private boolean released;

    /** {@code ownQueuePair}: created with {@code ibv_create_qp}, for the channel to move to RTS itself. */
    RdmaConnection(RdmaIoHandler.Registration registration, EventLoop loop, CmId id, RdmaDevices.Device device,
                   RdmaChannelConfig config, boolean ownQueuePair) {
        this.handler = registration.handler();
        this.loop = loop;
        this.alloc = device.allocator();
        ProtectionDomain pd = device.pd();
        this.slotSize = config.getReceiveSlotSize();
        this.sqDepth = config.getSendQueueDepth();
        this.ringSize = ringSize(config, device);
        this.kernelRxe = device.replaysWindowWork();
        this.zeroCopy = config.isReceiveZeroCopy();
        this.config = config;
        int initialCredits = config.getInitialReceiveCredits();
        int maxCredits = config.getReceiveCredits();
        this.credits = new ReceiveWindow(initialCredits, maxCredits);
        this.received = new ReceivedQueue(maxCredits);
        this.rings = new OfferedRings(pd, handler.ringMemory(), ringSize,
                Math.max(RingMemory.MIN_RING, 8 * slotSize), slotSize, !device.windows(), alloc, loop, this);
        this.group = handler.queueGroup(device, slotSize, sqDepth, initialCredits);
        int maxGather = Math.max(2, Math.min(Sender.MAX_GATHER, device.maxSge()));
        ByteBuf headers = null;
        QueuePair q = null;
        SendQueue sq = null;
        try {
            headers = alloc.directBuffer(SendQueue.headerBytes(sqDepth), SendQueue.headerBytes(sqDepth));
            QpInitAttributes init = new QpInitAttributes(group.cq, group.cq, group.srq, sqDepth, 0, maxGather, 0,
                    config.getMaxInlineData(), false);
            q = ownQueuePair ? pd.createQp(init) : id.createQp(pd, init);
            sq = new SendQueue(registration.id(), q, group, sqDepth, alloc, headers, handler.sendWorkRequests(),
                    handler.batchFlags(), maxGather);
            handler.bindQueuePair(q, group, registration);
        } catch (RuntimeException e) {
            if (q != null) {
                q.close();
            }
            if (sq != null) {
                sq.release();
            } else if (headers != null) {
                headers.release();
            }
            group.leave(sqDepth, credits.limit(), credits.outstanding() + credits.owed(), loop);
            throw e;
        }
        qp = q;
        sends = sq;
        sq.onInvalidated(this);
        sender = new Sender(sq, alloc, counters, this, config.getWriteCoalesceThreshold());
    }

    private static volatile boolean loggedNoWindows;
    private static volatile boolean loggedReplays;
    /**
     * Offers receive rings on kernel rxe although its retransmissions replay memory-window work (tests of the ring
     * path on the real driver, on a network that loses nothing).
     */
    static final String KERNEL_RXE_RINGS_PROPERTY = "io.netty.contrib.rdma.kernelRxeRings";

    /**
     * The ring size to offer: the configured one, or 0 (large messages by SEND) on a device without type-2 memory
     * windows, unless the channel accepts rkeys valid on every queue pair of the protection domain, and on a device
     * that replays memory-window work when it retransmits (kernel rxe), unless {@link #KERNEL_RXE_RINGS_PROPERTY}
     * is {@code true}.
     */
    private static int ringSize(RdmaChannelConfig config, RdmaDevices.Device device) {
        if (config.getRingSize() == 0) {
            return 0;
        }
        if (device.replaysWindowWork() && !SystemPropertyUtil.getBoolean(KERNEL_RXE_RINGS_PROPERTY, false)) {
            if (!loggedReplays) {
                loggedReplays = true;
                logger.info("{} is kernel rxe, whose retransmissions run the memory-window binds and invalidations of"
                        + " a send queue again, which fails its queue pair: no receive rings are offered there (large"
                        + " messages travel as SENDs, copied); -D{}=true offers them anyway", device.context(),
                        KERNEL_RXE_RINGS_PROPERTY);
            }
            return 0;
        }
        if (device.windows()) {
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
        sender.start(peer);
    }

    boolean started() {
        return sender.started();
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
                ringWriteArrived(slot, immediate, false, 0);
                queued = true;
                return;
            }
            if (opcode != IbvWcOpcode.RECV) {
                throw new ProtocolException("unexpected receive completion opcode " + opcode);
            }
            int length = wcs.byteLen(i);
            header.wrap(ALL_MEMORY, address).validate(length);
            if (header.type() == MessageHeader.TYPE_SEAL) {
                if (!wcs.hasInv(i, kernelRxe)) {
                    throw new ProtocolException("SEAL message without an invalidation (not a SEND_WITH_INV)");
                }
                ringWriteArrived(slot, header.sealImmediate(), true, wcs.invalidatedRkey(i));
                queued = true;
                return;
            }
            if (wcs.hasInv(i, kernelRxe)) {
                // It invalidated a window of this side that nothing said it leaves.
                throw new ProtocolException(MessageHeader.typeName(header.type()) + " message sent with an"
                        + " invalidation (only SEAL may invalidate)");
            }
            if (rings.peerWriting()) {
                // Its writes into that slab could not be delivered before this message: the writer seals first.
                throw new ProtocolException(MessageHeader.typeName(header.type()) + " message while the peer has not"
                        + " left the ring slab it writes (no SEAL)");
            }
            sender.granted(header.recvCredits(), header.returnedSlabs());
            int flags = header.flags();
            if ((flags & MessageHeader.FLAG_RING_SEEN) != 0) {
                rings.peerLeftRetired();
            }
            if ((flags & MessageHeader.FLAG_WANTS_RING) != 0) {
                rings.peerWantsRing();
            }
            switch (header.type()) {
                case MessageHeader.TYPE_DATA -> {
                    received.add(slot, ReceivedQueue.DATA, address + MessageHeader.LENGTH,
                            length - MessageHeader.LENGTH, -1, null);
                    queued = true;
                }
                case MessageHeader.TYPE_SHUTDOWN -> {
                    received.add(slot, ReceivedQueue.SHUTDOWN, 0, 0, -1, null);
                    queued = true;
                }
                case MessageHeader.TYPE_RING -> sender.peerRingSwitched(header);
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

    /**
     * A ring write announced by {@code immediate} arrived (its receive took {@code slot}): queued for delivery. By
     * a SEAL message ({@code sealed}) whose SEND_WITH_INV invalidated {@code invalidatedRkey}, which must be the
     * window of the write's slab: then the slab is delivered with no LOCAL_INV of this side's.
     */
    private void ringWriteArrived(int slot, int immediate, boolean sealed, int invalidatedRkey) {
        ReceiveRing r = rings.ringOf(immediate);
        if (sealed && !r.hasWindows()) {
            throw new ProtocolException("SEAL message for a ring whose slabs have no windows (FIXED_RKEYS)");
        }
        int slab = r.slabs.arrive(immediate);
        if (sealed) {
            if (invalidatedRkey != r.windowRkey(slab)) {
                throw new ProtocolException("SEAL message of slab " + slab + " invalidated rkey 0x"
                        + Integer.toHexString(invalidatedRkey) + ", not the slab's window 0x"
                        + Integer.toHexString(r.windowRkey(slab)));
            }
            r.slabs.invalidatedByPeer(slab);
        }
        r.arrivals++;
        // Queued bytes keep their ring alive, also when it retires before they are read.
        r.refs.incrementAndGet();
        received.add(slot, ReceivedQueue.RING, r.memory.address() + r.slabs.lastOffset(), Immediate.length(immediate),
                slab, r);
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
        slotReplaced();
    }

    /** A slot of this connection's messages is free or lent: a receive takes its place, and credit follows. */
    private void slotReplaced() {
        group.repost();
        int raise = credits.freed(group.room());
        if (raise > 0) {
            group.raise(raise);
        }
    }

    /** How long the device has owed this connection a send completion and given none (0 when none is owed). */
    long sendStalledNanos(long now) {
        if (released) {
            return 0;
        }
        if (sends.unsignaledTail()) {
            // Unsignalled sends at the tail: ask, so that the next look knows whether they are stuck.
            sends.probe();
        }
        return sends.stalledNanos(now);
    }

    /**
     * Changes whenever a message is read or a send completes: a connection whose figure stays as it was is idle
     * (the keepalive of {@link RdmaChannelOption#KEEPALIVE_IDLE_MILLIS}).
     */
    long activity() {
        return counters.bytesRead + sends.completedCount();
    }

    /** Probes the peer when nothing is outstanding ({@link SendQueue#probeIdle}); whether a probe went out. */
    boolean probeIdle() {
        return !released && sends.probeIdle();
    }

    boolean hasPending() {
        return !released && !received.isEmpty();
    }

    /**
     * Whether what waits can be delivered now: not while the oldest message is a ring write whose slab's window is
     * still being invalidated (its completion comes with the next poll of the completion queue).
     */
    boolean deliverable() {
        if (!hasPending()) {
            return false;
        }
        ReceiveRing r = received.ring();
        return r == null || r.slabs.deliverable((int) received.ringSeq());
    }

    /** Whether the oldest message waiting is a ring write whose slab's invalidation is posted and not complete. */
    boolean awaitsInvalidation() {
        if (!hasPending()) {
            return false;
        }
        ReceiveRing r = received.ring();
        return r != null && r.slabs.state((int) received.ringSeq()) == RingSlabs.INVALIDATING;
    }

    /** Hands queued data to {@code inbound} while it reads; returns how many messages it took. */
    int deliver(Inbound inbound) {
        int delivered = 0;
        // The reader may close the channel, and so release this connection, from inside a callback.
        // A SHUTDOWN with nothing before it is delivered even when the reader is not reading, as a socket reports
        // end of input.
        while (!released && !received.isEmpty()
                && (received.kind() == ReceivedQueue.SHUTDOWN || inbound.reading())) {
            byte kind = received.kind();
            ReceiveRing r = received.ring();
            int slab = (int) received.ringSeq();
            if (r != null && !r.slabs.deliverable(slab)) {
                // The peer may still write there: its window is being invalidated (flushReceives), then delivery
                // goes on.
                break;
            }
            if (kind == ReceivedQueue.RING && zeroCopy && config.getAllocator() instanceof RdmaByteBufAllocator
                    && rings.mayHold(r, slab)) {
                deliverRingBuffer(inbound);
                delivered++;
                returnReleasedSlabs();
                continue;
            }
            if (kind == ReceivedQueue.DATA && zeroCopy && received.length() >= slotSize / LEND_SLOT_SHARE
                    && config.getAllocator() instanceof RdmaByteBufAllocator && group.mayLend()) {
                deliverSlotBuffer(inbound);
                delivered++;
                continue;
            }
            if (kind != ReceivedQueue.SHUTDOWN && received.length() > 0) {
                int n = inbound.data(received.address(), received.length());
                counters.bytesRead += n;
                counters.copies++;
                delivered++;
                if (released) {
                    break;
                }
                received.taken(n);
                if (received.length() > 0) {
                    continue;
                }
            }
            int slot = received.slot();
            received.remove();
            try {
                if (kind == ReceivedQueue.SHUTDOWN) {
                    delivered++;
                    inbound.shutdown();
                }
            } finally {
                // Also when the reader closed the channel meanwhile: the slot belongs to the loop's shared queue.
                freeSlot(slot);
                if (r != null) {
                    rings.delivered(r, slab);
                }
            }
            if (r != null) {
                returnReleasedSlabs();
            }
        }
        return delivered;
    }

    /** Hands the SEND at the head of the queue to the reader as a buffer over its receive slot. */
    private void deliverSlotBuffer(Inbound inbound) {
        int slot = received.slot();
        int length = received.length();
        ByteBuf buf = group.lend(slot, received.address(), length);
        received.remove();
        counters.bytesRead += length;
        counters.zeroCopyBuffers++;
        slotReplaced();
        inbound.buffer(buf);
    }

    /** Hands the ring write at the head of the queue to the reader as a buffer over the ring. */
    private void deliverRingBuffer(Inbound inbound) {
        ReceiveRing r = received.ring();
        int length = received.length();
        ByteBuf buf = r.heldBuffer(alloc, received.address(), length, (int) received.ringSeq());
        int slot = received.slot();
        received.remove();
        counters.bytesRead += length;
        counters.zeroCopyBuffers++;
        freeSlot(slot);
        rings.unref(r);
        inbound.buffer(buf);
    }

    @Override
    public void ringBufferReleased(ReceiveRing r, int slab) {
        if (released) {
            rings.unref(r);
            return;
        }
        if (rings.bufferReleased(r, slab) && !creditFlushScheduled && (creditsDue() || rings.windowWorkDue())) {
            // Nothing else may come to carry the credit: a writer waiting for ring space would wait forever.
            creditFlushScheduled = true;
            loop.execute(creditFlush);
        }
    }

    /**
     * The peer left and the queue pair was moved to ERR: what arrived in the ring can be delivered, its slabs taking
     * no more writes ({@link OfferedRings#queuePairFailed}).
     */
    void peerLeft() {
        if (!released) {
            rings.queuePairFailed();
        }
    }

    @Override
    public void invalidated(ReceiveRing ring, int slab) {
        if (!released) {
            ring.slabs.invalidated(slab);
        }
    }

    /**
     * Invalidates the slabs the peer left and binds again those the reader released; posts a CREDIT or RING
     * message if the peer needs one.
     */
    void flushReceives() {
        if (released || !sender.started() || sends.batching()) {
            return;
        }
        if (rings.windowWorkDue()) {
            postWindowWork();
        }
        // A RING takes a bind per slab, then the message.
        if (sends.room() > ReceiveRing.MAX_SLABS + 1 && rings.announceDue() && sender.tryAcquireControlMessage()) {
            offerRing();
        }
        sendCreditIfDue();
    }

    /**
     * While a queue of ring writes is delivered: the slabs the reader let go of (a decoder keeps a buffer until the
     * next one comes) or that were copied out are bound again at once, and returned if the writer needs them, not
     * after the rest of the queue: a writer that filled the ring waits for them.
     */
    private void returnReleasedSlabs() {
        if (!released && sender.started() && !sends.batching() && rings.windowWorkDue()) {
            postWindowWork();
            sendCreditIfDue();
        }
    }

    private void sendCreditIfDue() {
        if (creditsDue() && sends.room() > 0 && sender.tryAcquireControlMessage()) {
            sender.sendCredit();
        }
    }

    /** Posts the invalidations of closed slabs and the binds of released ones, in one doorbell. */
    private void postWindowWork() {
        sends.seal(); // its SEAL message, if any, before the room is counted
        int room = Math.min(sends.room(), sends.batchRoom());
        int added = rings.invalidate(sends, room);
        int rebinding = rings.rebind(sends, room - added);
        sends.post();
        rings.rebound(rebinding);
    }

    /**
     * Whether to send a CREDIT message now, with no DATA going out to carry the credits: when the receive window
     * says so, when this side owes the peer a {@link MessageHeader#FLAG_RING_SEEN}, or when the peer may be unable
     * to write for want of ring space ({@link OfferedRings#creditsDue()}).
     */
    private boolean creditsDue() {
        return sender.ringSeenOwed() || credits.due() || rings.creditsDue();
    }

    /**
     * Sends RING: a new ring (asked for, or replacing one pinned by held buffers), or none (the ring was idle).
     * The current ring retires. Needs send room and a control credit, taken by the caller.
     */
    private void offerRing() {
        ReceiveRing next;
        try {
            next = rings.next(sender.peerSlotSize());
        } catch (RuntimeException e) {
            // Without a ring, large messages go on by SEND (or wait for held buffers to be released).
            sender.releaseControlMessage();
            // Near RLIMIT_MEMLOCK every connection that asks fails the same way: one line and a count.
            RING_FAILURES.log(RefusalLog.Kind.RING_FAILED, "could not register a receive ring of " + ringSize
                    + " bytes: large messages go on as SENDs of " + slotSize + " bytes: " + e.getMessage(), e);
            return;
        }
        if (next != null) {
            next.bindWindows(sends);
        }
        sender.writeRingHeader();
        if (next == null) {
            sends.sendRing(0, 0, null, 0, 0);
        } else {
            sends.sendRing(next.memory.address(), (int) next.size, next.rkeys, next.slabs.count(),
                    next.hasWindows() ? 0 : MessageHeader.RING_FIXED_RKEYS);
        }
        sends.post();
        if (next != null) {
            next.windowsBound();
        }
        rings.announced(next);
        if (next != null) {
            counters.ringsOffered++;
            if (ringCheck == null) {
                ringCheck = loop.scheduleAtFixedRate(this::checkRingIdle, RING_IDLE_MILLIS, RING_IDLE_MILLIS,
                        TimeUnit.MILLISECONDS);
            }
        } else {
            counters.ringsWithdrawn++;
            if (ringCheck != null) {
                ringCheck.cancel(false);
                ringCheck = null;
            }
        }
    }

    /** A ring that received nothing since the last look and holds nothing is withdrawn: memory follows traffic. */
    private void checkRingIdle() {
        if (!released && rings.checkIdle()) {
            flushReceives();
        }
    }

    @Override
    public int takeReceiveCredits() {
        // Committed already: their receives are posted before the send goes.
        return credits.take();
    }

    @Override
    public int takeReturnedSlabs() {
        return rings.takeOwed();
    }

    // ---------------------------------------------------------------- send

    /**
     * Posts as much of {@code in}'s flushed data as credits and the send queue allow ({@link Sender}).
     *
     * @return {@code true} when everything flushed was posted
     */
    boolean write(ChannelOutboundBuffer in) throws IOException {
        return sender.write(in);
    }

    /** Posts SHUTDOWN; {@code false} when out of credit or send queue room (retry after completions). */
    boolean shutdownOutput() {
        return sender.shutdownOutput();
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
                + counters.coalescedWrites + " writes in " + counters.coalescedSends + " sends, " + sender
                + ", credits=" + credits + ", " + sends + ", pending=" + received.size() + ", " + rings
                + ", group=" + group + ", released=" + released + '}';
    }

    /**
     * No send is waiting for its completion, and none is being prepared: a channel closed from a promise listener
     * while {@link #write} runs lingers until what that call posts has gone out.
     */
    boolean sendsDone() {
        return sender.idle();
    }

    /**
     * Asks for a completion behind the last send posted, so that {@link #sendsDone()} becomes true once everything
     * has gone out (sends may be posted unsignalled: {@link SendQueue}); from now on every batch ends signalled. With
     * the send queue full, call again at the next send completion. A device that refuses the request leaves the
     * linger to its time bound.
     */
    void requestSendCompletion() {
        try {
            sends.requestCompletion();
        } catch (RuntimeException e) {
            logger.debug("could not post the completion a closing connection waits for: {}", e.toString());
        }
    }

    /** The queue pair's number (for messages); 0 once it is gone. */
    int qpNum() {
        return qp != null ? qp.qpNum() : 0;
    }

    /** Destroys the queue pair: no more DMA into this connection's memory, no more completions. */
    void destroyQueuePair() {
        // Windows go first: on kernel rxe a bound window holds its queue pair.
        rings.closeWindows();
        if (qp != null) {
            handler.unbindQueuePair(qp);
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
        sender.release();
        sends.release();
        while (!received.isEmpty()) {
            group.release(received.slot());
            if (received.ring() != null) {
                received.ring().unref();
            }
            received.remove();
        }
        rings.release();
        group.leave(sqDepth, credits.limit(), credits.outstanding() + credits.owed(), loop);
    }
}
