package io.netty.contrib.channel.rdma;

import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelOutboundBuffer;
import io.netty.channel.EventLoop;
import io.netty.channel.FileRegion;
import io.netty.contrib.channel.rdma.internal.memory.ExternalRegion;
import io.netty.contrib.channel.rdma.internal.memory.MemoryRegistrationException;
import io.netty.contrib.channel.rdma.internal.memory.RegisteredBuffer;
import io.netty.contrib.channel.rdma.internal.memory.RegisteredMemoryPool;
import io.netty.contrib.channel.rdma.internal.protocol.ConnectParameters;
import io.netty.contrib.channel.rdma.internal.protocol.Immediate;
import io.netty.contrib.channel.rdma.internal.protocol.MessageHeader;
import io.netty.contrib.channel.rdma.internal.protocol.ProtocolException;
import io.netty.contrib.channel.rdma.internal.protocol.RingReleases;
import io.netty.contrib.channel.rdma.internal.protocol.SendWindow;
import io.netty.contrib.channel.rdma.internal.verbs.CmId;
import io.netty.contrib.channel.rdma.internal.verbs.IbvAccessFlags;
import io.netty.contrib.channel.rdma.internal.verbs.IbvSendFlags;
import io.netty.contrib.channel.rdma.internal.verbs.IbvWcOpcode;
import io.netty.contrib.channel.rdma.internal.verbs.IbvWcStatus;
import io.netty.contrib.channel.rdma.internal.verbs.IbvWrOpcode;
import io.netty.contrib.channel.rdma.internal.verbs.MemoryRegion;
import io.netty.contrib.channel.rdma.internal.verbs.ProtectionDomain;
import io.netty.contrib.channel.rdma.internal.verbs.QpInitAttributes;
import io.netty.contrib.channel.rdma.internal.verbs.QueuePair;
import io.netty.contrib.channel.rdma.internal.verbs.RecvWorkRequests;
import io.netty.contrib.channel.rdma.internal.verbs.SendWorkRequests;
import io.netty.contrib.channel.rdma.internal.verbs.VerbsException;
import io.netty.contrib.channel.rdma.internal.verbs.WorkCompletions;
import io.netty.util.internal.logging.InternalLogger;
import io.netty.util.internal.logging.InternalLoggerFactory;

import java.io.EOFException;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.channels.WritableByteChannel;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * One connection's data path (docs/PROTOCOL.md): its queue pair, the receive buffers and receive ring it
 * offers the peer, the credits the peer offered, and the sends in flight. Loop-thread confined.
 *
 * <p>A ring write is handed to the reader as a buffer over the ring itself (no copy) while the buffers the reader
 * holds cover at most half of the ring; its space goes back to the writer when the buffer is released. Ring space
 * returns in ring order, so a buffer the reader keeps (an aggregator waiting for more) would pin everything after
 * it: when held buffers pin half the ring, this side registers a new ring, announces it (RING message) and retires
 * the old one, which is freed once its last buffer is released. While a retired ring lives, ring writes are copied
 * into buffers of the channel's allocator and their space is given back at once, as SENDs always are. So a reader
 * that holds what it got never stalls the writer, and holds at most one extra ring. Data the channel does not read
 * yet (auto-read off) stays where it landed and its credit is returned only when it is read: the peer then runs
 * out of credit, which is the backpressure.
 */
final class RdmaConnection {
    private static final InternalLogger logger = InternalLoggerFactory.getInstance(RdmaConnection.class);
    /** Work requests prepared before one {@code ibv_post_send}. */
    private static final int SEND_BATCH = 32;
    /** Every this many sends one is signalled; the last of each batch always is. */
    private static final int SIGNAL_INTERVAL = 16;
    private static final int PAGE = 4096;

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
    private final RdmaIoHandler.DeviceQueue deviceQueue;
    private final int cqEntries;
    private final RdmaByteBufAllocator alloc;
    private final RegisteredMemoryPool pool;
    private final EventLoop loop;
    private final Arena arena = Arena.ofShared();
    final QueuePair qp;

    // Receive side: buffers posted for the peer's SENDs (and ring writes), and the ring it may write.
    private final int recvCount;
    private final int recvSize;
    private final MemorySegment recvMemory;
    private final MemoryRegion recvMr;
    private final RecvWorkRequests recvWrs;
    private int repostCount;
    private int owedRecvCredits;
    /** Receive credits the peer holds as far as this side knows: granted, minus messages received since. */
    private int peerRecvCredits;
    private final ProtectionDomain pd;
    private final int ringSize;
    /** The ring the peer writes to now; null when this side offers none. */
    private Ring ring;
    /** The ring before it, while buffers over it are held or writes to it may still land; else null. */
    private Ring retired;
    /** The peer may still write to {@link #retired}: no write to {@link #ring} has arrived yet. */
    private boolean retiredMayReceive;
    private boolean creditFlushScheduled;
    private final Runnable creditFlush = () -> {
        creditFlushScheduled = false;
        flushReceives();
    };
    // Received, not yet read: recv slots in arrival order, with what each holds.
    private final int[] pendingSlots;
    private final byte[] pendingKind;
    private final long[] pendingAddress;
    private final int[] pendingLength;
    private final long[] pendingRingSeq;
    private final Ring[] pendingRing;
    private int pendingHead;
    private int pendingCount;
    private static final byte KIND_DATA = 1;
    private static final byte KIND_RING = 2;
    private static final byte KIND_SHUTDOWN = 3;
    /** A ring write being copied out in parts. */
    private static final byte KIND_RING_COPY = 4;

    // Send side.
    private final int sqDepth;
    private final int maxInline;
    private final MemorySegment headers;
    private final MemoryRegion headerMr;
    private final SendWorkRequests sendWrs = new SendWorkRequests(SEND_BATCH, 2);
    private final int[] batchFlags = new int[SEND_BATCH];
    private int batchCount;
    private final ByteBuf[] inflight;
    private long postedSeq;
    private long completedSeq;
    private int unsignaled;
    private SendWindow window;
    private long peerRingAddress;
    private int peerRingRkey;
    private int peerMaxSend;
    private int maxRingWrite;
    private boolean peerRingGeneration;
    /** Why the last ring switch failed, if it did (registration refused); kept for diagnosis. */
    private RuntimeException switchFailure;
    private final MessageHeader header = new MessageHeader();
    /** Part of a FileRegion read and waiting for credit to be sent. */
    private ByteBuf fileChunk;
    private boolean released;

    RdmaConnection(int channelId, EventLoop loop, RdmaIoHandler handler, CmId id, RdmaDevices.Device device,
                   RdmaChannelConfig config) {
        this.channelId = channelId;
        this.loop = loop;
        this.alloc = device.allocator();
        this.pool = alloc.pool();
        var pd = device.pd();
        this.recvCount = config.getReceiveBufferCount();
        this.peerRecvCredits = recvCount;
        this.recvSize = config.getRdmaReceiveBufferSize();
        this.sqDepth = config.getSendQueueDepth();
        this.pd = pd;
        this.ringSize = config.getRingSize();
        this.cqEntries = sqDepth + recvCount;
        this.deviceQueue = handler.deviceQueue(id.verbs(), cqEntries);
        boolean ok = false;
        try {
            recvMemory = touched(arena.allocate((long) recvCount * recvSize, PAGE));
            recvMr = register(pd, recvMemory, IbvAccessFlags.LOCAL_WRITE, "a connection's receive buffers");
            // One header per send slot, then the payload of the one RING message that can be in flight.
            headers = arena.allocate((long) sqDepth * MessageHeader.LENGTH + MessageHeader.RING_PAYLOAD, PAGE);
            headerMr = register(pd, headers, IbvAccessFlags.LOCAL_WRITE, "a connection's message headers");
            ring = ringSize > 0 ? Ring.create(this, false) : null;
            qp = id.createQp(pd, new QpInitAttributes(deviceQueue.cq, deviceQueue.cq, null, sqDepth, recvCount,
                    2, 1, config.getMaxInlineData(), false));
            maxInline = qp.maxInlineData();
            recvWrs = new RecvWorkRequests(recvCount, 1);
            inflight = new ByteBuf[sqDepth];
            pendingSlots = new int[recvCount];
            pendingKind = new byte[recvCount];
            pendingAddress = new long[recvCount];
            pendingLength = new int[recvCount];
            pendingRingSeq = new long[recvCount];
            pendingRing = new Ring[recvCount];
            for (int slot = 0; slot < recvCount; slot++) {
                recvWrs.set(slot, WrId.encode(channelId, WrId.RECV, slot), recvMr, (long) slot * recvSize, recvSize);
            }
            try {
                qp.postRecv(recvWrs, 0, recvCount);
            } catch (RuntimeException e) {
                qp.close();
                throw e;
            }
            ok = true;
        } finally {
            if (!ok) {
                release();
            }
        }
    }

    /** Registers {@code memory}; a failure names the locked-memory limit, the usual cause. */
    private static MemoryRegion register(ProtectionDomain pd, MemorySegment memory, int access, String what) {
        try {
            return pd.registerMemory(memory, access);
        } catch (VerbsException e) {
            throw MemoryRegistrationException.of(what, memory.byteSize(), e);
        }
    }

    private static MemorySegment touched(MemorySegment segment) {
        // Pages must exist before registration: copy-on-write after it would silently break the mapping.
        segment.fill((byte) 0);
        return segment;
    }

    /** Writes what this side offers the peer. */
    void writeConnectParameters(MemorySegment out) {
        new ConnectParameters().wrap(out).writeHeader()
                .ringAddress(ring == null ? 0 : ring.mr.addr())
                .ringRkey(ring == null ? 0 : ring.mr.rkey())
                .ringSize(ring == null ? 0 : (int) ring.mr.length())
                .recvCredits(recvCount)
                .recvBufferSize(recvSize);
    }

    /** Takes what the peer offered; sending may start. */
    void start(ConnectParameters peer) {
        window = new SendWindow(peer.recvCredits(), peer.ringSize());
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
        int status = wcs.status(i);
        int slot = WrId.slot(wcs.wrId(i));
        if (status != IbvWcStatus.SUCCESS) {
            throw new IOException("RDMA receive failed: " + IbvWcStatus.name(status));
        }
        if (slot >= recvCount) {
            throw new ProtocolException("receive completion for unknown slot " + slot);
        }
        int opcode = wcs.opcode(i);
        peerRecvCredits--;
        if (opcode == IbvWcOpcode.RECV_RDMA_WITH_IMM) {
            int immediate = wcs.immData(i);
            Ring r = ringOf(immediate);
            long seq = r.releases.arrive(immediate);
            enqueue(slot, KIND_RING, r.memory.address() + r.releases.lastOffset(), Immediate.length(immediate), seq, r);
            return;
        }
        if (opcode != IbvWcOpcode.RECV) {
            throw new ProtocolException("unexpected receive completion opcode " + opcode);
        }
        int length = wcs.byteLen(i);
        long offset = (long) slot * recvSize;
        header.wrap(recvMemory, offset).validate(length);
        if (window != null) {
            window.grant(header.recvCredits(), header.ringCredits());
        }
        switch (header.type()) {
            case MessageHeader.TYPE_DATA -> enqueue(slot, KIND_DATA,
                    recvMemory.address() + offset + MessageHeader.LENGTH, length - MessageHeader.LENGTH, -1, null);
            case MessageHeader.TYPE_SHUTDOWN -> enqueue(slot, KIND_SHUTDOWN, 0, 0, -1, null);
            case MessageHeader.TYPE_RING -> {
                peerRingSwitched(header);
                repost(slot);
            }
            default -> repost(slot);
        }
    }

    /** The ring a write with this immediate landed in. */
    private Ring ringOf(int immediate) {
        if (ring == null) {
            throw new ProtocolException("peer wrote into a receive ring this side did not offer");
        }
        boolean generation = Immediate.generation(immediate);
        if (generation == ring.generation) {
            if (retiredMayReceive) {
                // Writes come in order: nothing more will land in the retired ring.
                retiredMayReceive = false;
                unrefRetired();
            }
            return ring;
        }
        if (retiredMayReceive) {
            return retired;
        }
        throw new ProtocolException("ring write of generation " + generation + " after the switch to a new ring");
    }

    /** The peer replaced its receive ring: later writes go there. */
    private void peerRingSwitched(MessageHeader header) {
        if (window == null) {
            throw new ProtocolException("RING message before the connection was established");
        }
        long size = header.ringSize();
        if (size > Integer.MAX_VALUE) {
            throw new ProtocolException("RING message announces a ring of " + size + " bytes");
        }
        window.switchRing(size);
        peerRingAddress = header.ringAddress();
        peerRingRkey = header.ringRkey();
        maxRingWrite = (int) (size / 4);
        peerRingGeneration = !peerRingGeneration;
    }

    private void enqueue(int slot, byte kind, long address, int length, long ringSeq, Ring r) {
        int at = (pendingHead + pendingCount++) % recvCount;
        pendingSlots[at] = slot;
        pendingKind[at] = kind;
        pendingAddress[at] = address;
        pendingLength[at] = length;
        pendingRingSeq[at] = ringSeq;
        pendingRing[at] = r;
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
            Ring r = pendingRing[at];
            if (kind == KIND_RING && r == ring && retired == null && switchFailure == null
                    && r.held + r.releases.span(pendingRingSeq[at]) <= r.size / 2) {
                deliverRingBuffer(inbound, at);
                delivered++;
                continue;
            }
            if (kind != KIND_SHUTDOWN && pendingLength[at] > 0) {
                int n = inbound.data(pendingAddress[at], pendingLength[at]);
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
            pendingHead = (pendingHead + 1) % recvCount;
            pendingCount--;
            try {
                if (kind == KIND_SHUTDOWN) {
                    delivered++;
                    inbound.shutdown();
                }
            } finally {
                pendingRing[at] = null;
                if (!released) {
                    if (kind == KIND_RING || kind == KIND_RING_COPY) {
                        r.releases.release(pendingRingSeq[at]);
                    }
                    repost(pendingSlots[at]);
                }
            }
        }
        return delivered;
    }

    /** Hands the ring write queued at {@code at} to the reader as a buffer over the ring. */
    private void deliverRingBuffer(Inbound inbound, int at) {
        long seq = pendingRingSeq[at];
        int slot = pendingSlots[at];
        Ring r = pendingRing[at];
        pendingRing[at] = null;
        pendingHead = (pendingHead + 1) % recvCount;
        pendingCount--;
        r.held += r.releases.span(seq);
        r.refs.incrementAndGet();
        ByteBuf buf = alloc.leakAware(r.buffer(alloc, pendingAddress[at] - r.memory.address(), pendingLength[at], seq));
        repost(slot);
        inbound.buffer(buf);
    }

    /** The reader released a buffer over {@code r} (loop thread). */
    private void ringBufferReleased(Ring r, long seq) {
        if (!released) {
            r.held -= r.releases.span(seq);
            r.releases.release(seq);
            if (r == ring && !creditFlushScheduled && creditsDue()) {
                // Nothing else may come to carry the credit: a writer waiting for ring space would wait forever.
                creditFlushScheduled = true;
                loop.execute(creditFlush);
            }
        }
        r.unref();
        if (r == retired && r.refs.get() == 0) {
            retired = null;
        }
    }

    private void unrefRetired() {
        retired.unref();
        if (retired.refs.get() == 0) {
            retired = null;
        }
    }

    /** Held buffers pin half of the ring: give the peer a new one, so it can go on writing. */
    private boolean ringSwitchDue() {
        return ring != null && retired == null && ring.held > 0 && ring.releases.pinned() >= ring.size / 2;
    }

    /** Registers a new ring and announces it; the current one retires. Needs send room and a credit. */
    private void switchRing() {
        Ring next;
        try {
            next = Ring.create(this, !ring.generation);
        } catch (RuntimeException e) {
            // Without a new ring the writer waits until the reader releases what it holds.
            window.releaseUnused();
            switchFailure = e;
            logger.warn("could not register a new receive ring of {} bytes; buffers over the current one that the "
                    + "reader holds now stall the writer until they are released, and ring writes are copied from "
                    + "now on", ringSize, e);
            return;
        }
        int i = batchCount;
        int slot = slotOf(postedSeq + i);
        int recvCredits = Math.min(owedRecvCredits, MessageHeader.MAX_RECV_CREDITS);
        owedRecvCredits -= recvCredits;
        peerRecvCredits += recvCredits;
        long payload = (long) sqDepth * MessageHeader.LENGTH;
        header.wrap(headers, (long) slot * MessageHeader.LENGTH).write(MessageHeader.TYPE_RING, recvCredits, 0);
        header.wrap(headers, payload - MessageHeader.LENGTH)
                .writeRing(next.mr.addr(), next.mr.rkey(), (int) next.size);
        sendWrs.set(i, WrId.encode(channelId, WrId.SEND, slot), IbvWrOpcode.SEND, 0);
        sendWrs.sge(i, 0, headerMr, (long) slot * MessageHeader.LENGTH, MessageHeader.LENGTH);
        sendWrs.sge(i, 1, headerMr, payload, MessageHeader.RING_PAYLOAD);
        sendWrs.numSge(i, 2);
        batchFlags[i] = MessageHeader.LENGTH + MessageHeader.RING_PAYLOAD <= maxInline ? IbvSendFlags.INLINE : 0;
        batchCount++;
        postBatch();
        retired = ring;
        retiredMayReceive = true;
        ring = next;
    }

    /**
     * The receive ring: this connection's own memory region, the only one a peer may write remotely. It stays
     * registered and allocated until the connection and every buffer handed out over it have let go.
     */
    private final class Ring extends ExternalRegion {
        final Arena arena;
        final MemorySegment memory;
        final MemoryRegion mr;
        final long size;
        final RingReleases releases;
        /** The immediate's generation bit of writes into this ring. */
        final boolean generation;
        /** Ring bytes under buffers the reader holds (loop thread). */
        long held;
        /**
         * The connection's reference (while current or while writes may still land) plus one per buffer held.
         * Atomic only for buffers released after the loop stopped.
         */
        final AtomicInteger refs = new AtomicInteger(1);

        private Ring(Arena arena, MemorySegment memory, MemoryRegion mr, boolean generation) {
            super(memory, mr.lkey(), pool);
            this.arena = arena;
            this.memory = memory;
            this.mr = mr;
            this.size = memory.byteSize();
            this.releases = new RingReleases(size, recvCount);
            this.generation = generation;
        }

        static Ring create(RdmaConnection c, boolean generation) {
            Arena arena = Arena.ofShared();
            try {
                MemorySegment memory = touched(arena.allocate(c.ringSize, PAGE));
                MemoryRegion mr = register(c.pd, memory, IbvAccessFlags.LOCAL_WRITE | IbvAccessFlags.REMOTE_WRITE,
                        "a connection's receive ring");
                return c.new Ring(arena, memory, mr, generation);
            } catch (RuntimeException e) {
                arena.close();
                throw e;
            }
        }

        void unref() {
            if (refs.decrementAndGet() == 0) {
                try {
                    mr.close();
                } finally {
                    arena.close();
                }
            }
        }

        @Override
        protected void released(long seq) {
            if (loop.inEventLoop()) {
                ringBufferReleased(this, seq);
                return;
            }
            try {
                loop.execute(() -> ringBufferReleased(this, seq));
            } catch (RejectedExecutionException e) {
                // The loop has stopped, and with it the connection: only the memory is left to free.
                unref();
            }
        }
    }

    private void repost(int slot) {
        recvWrs.set(repostCount++, WrId.encode(channelId, WrId.RECV, slot), recvMr, (long) slot * recvSize,
                recvSize);
        owedRecvCredits++;
    }

    /** Posts the receives freed since the last call, and a CREDIT message if the peer needs one. */
    void flushReceives() {
        if (released) {
            return;
        }
        if (repostCount > 0) {
            int n = repostCount;
            repostCount = 0;
            qp.postRecv(recvWrs, 0, n);
        }
        if (window != null && batchCount == 0 && switchFailure == null && ringSwitchDue() && sqRoom() > 0
                && window.tryAcquireCreditMessage()) {
            switchRing();
        }
        if (window != null && batchCount == 0 && creditsDue() && sqRoom() > 0
                && window.tryAcquireCreditMessage()) {
            prepareHeaderOnly(MessageHeader.TYPE_CREDIT);
            postBatch();
        }
    }

    /**
     * Whether to send a CREDIT message now, with no DATA going out to carry the credits. When half of the peer's
     * grant is owed; or when the peer may be unable to write because it is down to its reserve (it needs more than
     * that for data) or its free ring space, as this side knows it, is under half the ring (a write takes at most a
     * quarter plus a skipped tail of at most a quarter). Without the latter two, two peers that both write only
     * ring writes (which carry no credits) could each wait for the other's CREDIT.
     */
    private boolean creditsDue() {
        if (owedRecvCredits >= Math.max(1, recvCount / 2)
                || owedRecvCredits > 0 && peerRecvCredits <= SendWindow.RESERVED_RECV_CREDITS) {
            return true;
        }
        if (ring == null) {
            return false;
        }
        long owed = ring.releases.owed();
        return owed >= ring.size / 2 || owed > 0 && ring.releases.pinned() + owed >= ring.size / 2;
    }

    // ---------------------------------------------------------------- send

    private int sqRoom() {
        return (int) (sqDepth - (postedSeq + batchCount - completedSeq));
    }

    /**
     * Posts as much of {@code in}'s flushed data as credits and the send queue allow, in one doorbell per
     * {@value #SEND_BATCH} work requests.
     *
     * @return {@code true} when everything flushed was posted
     */
    boolean write(ChannelOutboundBuffer in) throws IOException {
        try {
            for (;;) {
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
                if (batchCount == SEND_BATCH) {
                    postBatch();
                }
                if (sqRoom() <= 0) {
                    return false;
                }
                int chunk;
                if (readable > peerMaxSend && maxRingWrite > 0) {
                    chunk = Math.min(readable, maxRingWrite);
                    if (!prepareRingWrite(buf, chunk)) {
                        return false;
                    }
                } else {
                    chunk = Math.min(readable, peerMaxSend);
                    if (!prepareSend(buf, chunk)) {
                        return false;
                    }
                }
                in.removeBytes(chunk);
            }
        } finally {
            postBatch();
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
        if (batchCount == SEND_BATCH) {
            postBatch();
        }
        if (sqRoom() <= 0) {
            return false;
        }
        boolean prepared = length > peerMaxSend && maxRingWrite > 0 ? prepareRingWrite(fileChunk, length)
                : prepareSend(fileChunk, length);
        if (!prepared) {
            return false;
        }
        fileChunk.release();  // the send holds its own reference until it completes
        fileChunk = null;
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

    private boolean prepareSend(ByteBuf buf, int length) {
        if (!window.tryAcquireMessage()) {
            return false;
        }
        int i = batchCount;
        int slot = slotOf(postedSeq + i);
        writeHeader(slot, MessageHeader.TYPE_DATA);
        int flags = length + MessageHeader.LENGTH <= maxInline ? IbvSendFlags.INLINE : 0;
        sendWrs.set(i, WrId.encode(channelId, WrId.SEND, slot), IbvWrOpcode.SEND, 0);
        sendWrs.sge(i, 0, headerMr, (long) slot * MessageHeader.LENGTH, MessageHeader.LENGTH);
        payloadSge(i, 1, slot, buf, length);
        sendWrs.numSge(i, 2);
        batchFlags[i] = flags;
        batchCount++;
        return true;
    }

    private boolean prepareRingWrite(ByteBuf buf, int length) {
        if (!window.tryAcquireMessage()) {
            return false;
        }
        long offset = window.tryReserveRing(length);
        if (offset < 0) {
            window.releaseUnused();
            return false;
        }
        int i = batchCount;
        int slot = slotOf(postedSeq + i);
        sendWrs.set(i, WrId.encode(channelId, WrId.SEND, slot), IbvWrOpcode.RDMA_WRITE_WITH_IMM, 0);
        sendWrs.immData(i, Immediate.encode(length, window.lastWrapped(), peerRingGeneration));
        sendWrs.rdma(i, peerRingAddress + offset, peerRingRkey);
        payloadSge(i, 0, slot, buf, length);
        sendWrs.numSge(i, 1);
        batchFlags[i] = 0;
        batchCount++;
        return true;
    }

    /** Points SGE {@code j} at {@code length} readable bytes of {@code buf}: in place if registered, else a copy. */
    private void payloadSge(int i, int j, int slot, ByteBuf buf, int length) {
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
        inflight[slot] = held;
        sendWrs.sgeAddress(i, j, address, length, (int) lkey);
    }

    /** Posts SHUTDOWN; {@code false} when out of credit or send queue room (retry after completions). */
    boolean shutdownOutput() {
        if (window == null || sqRoom() <= 0 || !window.tryAcquireMessage()) {
            return false;
        }
        prepareHeaderOnly(MessageHeader.TYPE_SHUTDOWN);
        postBatch();
        return true;
    }

    private void prepareHeaderOnly(byte type) {
        int i = batchCount;
        int slot = slotOf(postedSeq + i);
        writeHeader(slot, type);
        sendWrs.set(i, WrId.encode(channelId, WrId.SEND, slot), IbvWrOpcode.SEND, 0);
        sendWrs.sge(i, 0, headerMr, (long) slot * MessageHeader.LENGTH, MessageHeader.LENGTH);
        sendWrs.numSge(i, 1);
        batchFlags[i] = MessageHeader.LENGTH <= maxInline ? IbvSendFlags.INLINE : 0;
        batchCount++;
    }

    private void writeHeader(int slot, byte type) {
        int recvCredits = Math.min(owedRecvCredits, MessageHeader.MAX_RECV_CREDITS);
        owedRecvCredits -= recvCredits;
        peerRecvCredits += recvCredits;
        long ringCredits = ring == null ? 0 : ring.releases.takeOwed();
        header.wrap(headers, (long) slot * MessageHeader.LENGTH).write(type, recvCredits, (int) ringCredits);
    }

    private void postBatch() {
        int n = batchCount;
        if (n == 0) {
            return;
        }
        for (int i = 0; i < n; i++) {
            int flags = batchFlags[i];
            if (++unsignaled >= SIGNAL_INTERVAL || i == n - 1) {
                flags |= IbvSendFlags.SIGNALED;
                unsignaled = 0;
            }
            sendWrs.sendFlags(i, flags);
        }
        batchCount = 0;
        qp.postSend(sendWrs, 0, n);
        postedSeq += n;
    }

    private int slotOf(long seq) {
        return (int) (seq % sqDepth);
    }

    /**
     * Takes a send completion: every send up to it has completed (completions come in order), so their
     * buffers are released.
     *
     * @throws IOException on an error completion
     */
    void sent(WorkCompletions wcs, int i) throws IOException {
        released(wcs, i);
        int status = wcs.status(i);
        if (status != IbvWcStatus.SUCCESS) {
            throw new IOException("RDMA send failed: " + IbvWcStatus.name(status));
        }
    }

    /** Releases the buffers of every send up to the one completed by {@code wcs[i]}, whatever its status. */
    void released(WorkCompletions wcs, int i) {
        int slot = WrId.slot(wcs.wrId(i));
        long seq = completedSeq + Math.floorMod(slot - slotOf(completedSeq), sqDepth);
        for (long s = completedSeq; s <= seq && s < postedSeq; s++) {
            int at = slotOf(s);
            ByteBuf held = inflight[at];
            if (held != null) {
                inflight[at] = null;
                held.release();
            }
        }
        completedSeq = Math.min(seq + 1, postedSeq);
    }

    @Override
    public String toString() {
        return "RdmaConnection{window=" + window + ", posted=" + postedSeq + ", completed=" + completedSeq
                + ", batch=" + batchCount + ", pending=" + pendingCount + ", owedRecv=" + owedRecvCredits
                + ", peerRecvCredits=" + peerRecvCredits
                + (ring == null ? "" : ", ring{held=" + ring.held + ", pinned=" + ring.releases.pinned() + ", owed="
                        + ring.releases.owed() + ", outstanding=" + ring.releases.outstanding() + '}')
                + ", retired=" + (retired != null) + ", released=" + released + '}';
    }

    /** No send is waiting for its completion. */
    boolean sendsDone() {
        return completedSeq == postedSeq && batchCount == 0;
    }

    /** Destroys the queue pair: no more DMA into this connection's memory, no more completions. */
    void destroyQueuePair() {
        if (qp != null) {
            qp.close();
        }
    }

    /** Frees everything; call {@link #destroyQueuePair()} first. Idempotent. */
    void release() {
        if (released) {
            return;
        }
        released = true;
        if (fileChunk != null) {
            fileChunk.release();
            fileChunk = null;
        }
        for (int s = 0; inflight != null && s < inflight.length; s++) {
            if (inflight[s] != null) {
                inflight[s].release();
                inflight[s] = null;
            }
        }
        if (ring != null) {
            ring.unref();
        }
        if (retired != null && retiredMayReceive) {
            retired.unref();
        }
        closeQuietly(headerMr);
        closeQuietly(recvMr);
        closeQuietly(recvWrs);
        closeQuietly(sendWrs);
        deviceQueue.release(cqEntries);
        arena.close();
    }

    private static void closeQuietly(AutoCloseable c) {
        if (c != null) {
            try {
                c.close();
            } catch (Exception ignored) {
                // best effort on teardown
            }
        }
    }
}
