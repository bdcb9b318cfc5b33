package io.netty.contrib.channel.rdma;

import io.netty.buffer.ByteBuf;
import io.netty.channel.DefaultEventLoop;
import io.netty.contrib.channel.rdma.internal.protocol.Immediate;
import io.netty.contrib.channel.rdma.internal.protocol.ProtocolException;
import io.netty.contrib.channel.rdma.internal.verbs.VerbsContext;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.util.concurrent.Callable;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The receive rings a connection offers, decision by decision, on real registered memory: offered when asked
 * for, withdrawn when idle, their slabs invalidated before delivery and returned once released, and each freed
 * exactly when nothing can write or read it any more. (Regions with PD-wide rkeys: a window needs a queue pair to be
 * bound on; the windows are exercised end to end by RdmaReceiveRingTest and the hostile-peer tests.)
 */
class OfferedRingsTest {
    private static final int RING = 64 * 1024;
    private static final int QUARTER = RING / 4;

    private static DefaultEventLoop loop;
    private static RdmaDevices.Device device;

    @BeforeAll
    static void device() {
        SoftwareRdma.use();
        RdmaDevices.retain(RdmaIoHandlerConfig.HugePages.AUTO);
        device = RdmaDevices.of(VerbsContext.cmDevices().get(0));
        loop = new DefaultEventLoop();
    }

    @AfterAll
    static void close() throws Exception {
        loop.shutdownGracefully(0, 0, java.util.concurrent.TimeUnit.SECONDS).sync();
        RdmaDevices.release();
    }

    private OfferedRings rings;

    private OfferedRings newRings() {
        return rings = newRings(new RingMemory(4 * RING));
    }

    private static OfferedRings newRings(RingMemory memory) {
        // Plain regions (PD-wide rkeys): a window would need a queue pair to bind it on.
        OfferedRings[] self = new OfferedRings[1];
        self[0] = new OfferedRings(device.pd(), memory, RING, QUARTER, 8192, true, device.allocator(), loop,
                (r, slab) -> self[0].bufferReleased(r, slab));
        return self[0];
    }

    private static <T> T onLoop(Callable<T> task) throws Exception {
        return loop.submit(task).get();
    }

    private static long regions() {
        return SoftwareRdma.hasObjectCounts() ? SoftwareRdma.objectCounts().get("mr") : 0;
    }

    /** A sealed write of {@code length} bytes of generation {@code gen} into {@code slab} of {@code r}. */
    private static int arrive(ReceiveRing r, int slab, int length, boolean gen) {
        int landed = r.slabs.arrive(Immediate.encode(length, slab, true, gen));
        r.arrivals++;
        r.refs.incrementAndGet(); // as the connection does while the write waits to be read
        return landed;
    }

    /** Invalidates what was closed (at once without windows) and delivers the write in {@code slab} as a copy. */
    private static void deliver(OfferedRings rings, ReceiveRing r, int slab) {
        rings.invalidate(null, 32);
        assertThat(r.slabs.deliverable(slab)).isTrue();
        assertThat(rings.mayHold(r, slab)).as("no windows: always copied").isFalse();
        rings.delivered(r, slab);
    }

    @Test
    void aRingIsOfferedWhenAskedForAndWithdrawnWhenIdle() throws Exception {
        long before = regions();
        onLoop(() -> {
            OfferedRings rings = newRings();
            assertThat(rings.announceDue()).isFalse();
            rings.peerWantsRing();
            assertThat(rings.announceDue()).isTrue();
            ReceiveRing first = rings.next(8192);
            rings.announced(first);
            assertThat(rings.current()).isSameAs(first);
            assertThat(rings.announceDue()).isFalse();
            assertThat(first.generation).isTrue();
            assertThat(first.slabs.count()).as("slabs of four 8 KiB slots").isEqualTo(2);
            assertThat(rings.ringOf(Immediate.encode(100, 0, false, true))).isSameAs(first);
            assertThatThrownBy(() -> rings.ringOf(Immediate.encode(100, 0, false, false)))
                    .isInstanceOf(ProtocolException.class).hasMessageContaining("after the switch");

            // Traffic keeps it; a look with no arrival since the last one withdraws it (once nothing is out).
            deliver(rings, first, arrive(first, 0, 1000, true));
            assertThat(rings.checkIdle()).isFalse();
            assertThat(rings.checkIdle()).as("slab 0 is not back yet").isFalse();
            assertThat(rings.windowWorkDue()).isTrue();
            assertThat(rings.rebind(null, 32)).isEqualTo(1);
            assertThat(rings.creditsDue()).as("half the slabs owed").isTrue();
            assertThat(rings.takeOwed()).isEqualTo(1);
            assertThat(rings.checkIdle()).isTrue();
            assertThat(rings.announceDue()).isTrue();
            assertThat(rings.next(8192)).isNull();
            rings.announced(null);
            assertThat(rings.current()).isNull();
            // Until the peer confirms the RING, its writes may still land in the old ring, and nothing else is
            // announced (one generation bit).
            assertThat(rings.ringOf(Immediate.encode(100, 0, false, true))).isSameAs(first);
            rings.peerWantsRing();
            assertThat(rings.announceDue()).isFalse();
            rings.peerLeftRetired();
            assertThat(first.refs.get()).isZero();
            assertThatThrownBy(() -> rings.ringOf(Immediate.encode(100, 0, false, true)))
                    .isInstanceOf(ProtocolException.class).hasMessageContaining("offers no ring");
            assertThat(rings.announceDue()).isTrue();
            return null;
        });
        assertThat(regions()).isEqualTo(before);
    }

    @Test
    void aRingIsNeitherFoundIdleNorWithdrawnBeforeThePeerConfirmedIt() throws Exception {
        long before = regions();
        onLoop(() -> {
            OfferedRings rings = newRings();
            rings.peerWantsRing();
            ReceiveRing first = rings.next(8192);
            rings.announced(first);
            // The peer has not seen the RING yet: no write, but not idle either.
            assertThat(rings.checkIdle()).isFalse();
            assertThat(rings.checkIdle()).isFalse();
            assertThat(rings.announceDue()).isFalse();
            // Its RING_SEEN: from now on a look without writes finds it idle...
            rings.peerLeftRetired();
            assertThat(rings.checkIdle()).isTrue();
            assertThat(rings.announceDue()).isTrue();
            // ... unless a write arrives before the withdrawal goes out.
            deliver(rings, first, arrive(first, 0, 1000, true));
            assertThat(rings.announceDue()).as("written to since it was found idle").isFalse();
            assertThat(rings.checkIdle()).isFalse();
            rings.rebind(null, 32);
            rings.takeOwed();
            assertThat(rings.checkIdle()).isTrue();
            assertThat(rings.announceDue()).isTrue();
            assertThat(rings.next(8192)).isNull();
            rings.announced(null);
            // The withdrawal is unconfirmed: a ring wanted again waits for its RING_SEEN, which alone ends writes
            // to the old ring (a RING_SEEN of the offer, crossing the withdrawal, would be taken for it otherwise).
            rings.peerWantsRing();
            assertThat(rings.announceDue()).isFalse();
            assertThat(rings.ringOf(Immediate.encode(100, 0, false, true))).isSameAs(first);
            rings.peerLeftRetired();
            assertThat(rings.announceDue()).isTrue();
            return null;
        });
        assertThat(regions()).isEqualTo(before);
    }

    @Test
    void aSlabIsDeliveredOnlyOnceInvalidatedAndComesBackOnlyOnceReleased() throws Exception {
        long before = regions();
        onLoop(() -> {
            OfferedRings rings = newRings();
            rings.peerWantsRing();
            ReceiveRing ring = rings.next(8192);
            rings.announced(ring);
            // Unsealed: the writer is still in slab 0, and a SEND now would be a protocol error.
            ring.slabs.arrive(Immediate.encode(100, 0, false, true));
            ring.refs.incrementAndGet();
            assertThat(rings.peerWriting()).isTrue();
            assertThat(ring.slabs.deliverable(0)).isFalse();
            rings.invalidate(null, 32);
            assertThat(ring.slabs.deliverable(0)).as("not closed yet").isFalse();
            // A write into slab 1 leaves slab 0.
            int slab = arrive(ring, 1, 100, true);
            assertThat(slab).isEqualTo(1);
            assertThat(rings.peerWriting()).isFalse();
            rings.invalidate(null, 32);
            assertThat(ring.slabs.deliverable(0)).isTrue();
            assertThat(ring.slabs.deliverable(1)).isTrue();
            rings.delivered(ring, 1);
            rings.rebind(null, 32);
            assertThat(rings.takeOwed()).isEqualTo(0b10);
            assertThat(rings.checkIdle()).as("slab 0 still has a write").isFalse();
            rings.delivered(ring, 0);
            rings.rebind(null, 32);
            assertThat(rings.takeOwed()).isEqualTo(0b01);
            assertThat(ring.slabs.quiet()).isTrue();
            rings.release();
            return null;
        });
        assertThat(regions()).isEqualTo(before);
    }

    @Test
    void ringMemoryGivesEachStreamingConnectionItsShareAndNoneWhenTooLittleIsLeft() {
        RingMemory memory = new RingMemory(4 * RING);
        // One connection asking: a whole ring.
        memory.demand(0, 1);
        assertThat(memory.sizeFor(RING, QUARTER)).isEqualTo(RING);
        memory.demand(1, 2);
        memory.reserve(RING);
        // Eight streaming: each gets a power-of-two share of the limit, and a ring more than twice its share
        // makes room while others wait.
        for (int i = 0; i < 7; i++) {
            memory.demand(0, 1);
        }
        assertThat(memory.share()).isEqualTo(RING / 2);
        assertThat(memory.sizeFor(RING, QUARTER)).isEqualTo(RING / 2);
        assertThat(memory.oversized(2 * RING, QUARTER)).isTrue();
        assertThat(memory.oversized(RING, QUARTER)).as("twice its share").isFalse();
        // Seventeen: the share (8 KiB) is under the minimum; a wanted size below the minimum is not refused.
        for (int i = 0; i < 9; i++) {
            memory.demand(0, 1);
        }
        assertThat(memory.sizeFor(RING, QUARTER)).isZero();
        assertThat(memory.sizeFor(8192, QUARTER)).isEqualTo(8192);
        assertThat(memory.oversized(2 * RING, QUARTER)).as("a share under the minimum: withdrawing helps nobody")
                .isFalse();
        // Nobody waits: no ring is too large.
        for (int i = 0; i < 16; i++) {
            memory.demand(1, 0);
        }
        assertThat(memory.oversized(2 * RING, QUARTER)).isFalse();
        memory.release(RING);
        memory.demand(2, 0);
        assertThat(memory.pinned()).isZero();

        // At most what is left.
        RingMemory small = new RingMemory(RING + QUARTER / 2);
        small.demand(0, 1);
        assertThat(small.sizeFor(RING, QUARTER)).isEqualTo(RING);
        small.demand(1, 2);
        small.reserve(RING);
        small.demand(0, 1);
        assertThat(small.sizeFor(RING, QUARTER)).as("8 KiB left").isZero();
        assertThat(small.sizeFor(RING, 4096)).isEqualTo(QUARTER / 2);
        small.release(RING);
        assertThat(small.sizeFor(RING, QUARTER)).isEqualTo(RING / 2);
        // A limit below one ring: the one ring gets a share of it; none at all without ring memory.
        RingMemory below = new RingMemory(RING / 2);
        below.demand(0, 1);
        assertThat(below.sizeFor(RING, QUARTER)).isEqualTo(RING / 2);
        assertThat(new RingMemory(0).sizeFor(RING, QUARTER)).isZero();
    }

    @Test
    void severalStreamsShareAQuarterOfTheRingMemoryAndLargerRingsShrinkToIt() {
        long mib = 1 << 20;
        RingMemory memory = new RingMemory(64 * mib);
        memory.demand(0, 1);
        assertThat(memory.share()).as("one connection: all of it").isEqualTo(64 * mib);
        memory.demand(1, 0);
        // Four rings of 4 MiB, as they came one by one: 16 MiB, the streaming target, none above its share.
        for (int i = 0; i < 4; i++) {
            streamStarts(memory, 4 * mib, 4 * mib);
        }
        assertThat(memory.streamingTarget()).isEqualTo(16 * mib);
        assertThat(memory.oversized(4 * mib, QUARTER)).isFalse();
        // Four more: 2 MiB each; the rings now take 24 MiB, so the 4 MiB ones are above their share and make room
        // (offered again at 2 MiB), though nobody waits. The 2 MiB ones stay.
        for (int i = 0; i < 4; i++) {
            streamStarts(memory, 4 * mib, 2 * mib);
        }
        assertThat(memory.pinned()).isEqualTo(24 * mib);
        assertThat(memory.oversized(4 * mib, QUARTER)).isTrue();
        assertThat(memory.oversized(2 * mib, QUARTER)).isFalse();
        for (int i = 0; i < 4; i++) {
            memory.release(4 * mib);
            memory.reserve(2 * mib);
        }
        assertThat(memory.pinned()).isEqualTo(16 * mib);
        assertThat(memory.oversized(2 * mib, QUARTER)).isFalse();
        // 500 streaming: a quarter over 500 is under 64 KiB, the whole limit over 500 is not: 64 KiB each.
        for (int i = 8; i < 500; i++) {
            memory.demand(0, 1);
        }
        assertThat(memory.share()).isEqualTo(64 * 1024);
        assertThat(memory.sizeFor((int) (4 * mib), 64 * 1024)).isEqualTo(64 * 1024);
        assertThat(memory.oversized(2 * mib, 64 * 1024)).as("others wait").isTrue();
    }

    /** A connection asks for a ring of {@code wanted} bytes, is offered {@code expected}, and takes it. */
    private static void streamStarts(RingMemory memory, long wanted, long expected) {
        memory.demand(0, 1);
        assertThat(memory.sizeFor((int) wanted, QUARTER)).isEqualTo(expected);
        memory.demand(1, 2);
        memory.reserve(expected);
    }

    @Test
    void aRingFarAboveItsShareIsWithdrawnWhileOthersWaitForOne() throws Exception {
        long before = regions();
        RingMemory memory = new RingMemory(4 * RING);
        onLoop(() -> {
            OfferedRings a = newRings(memory);
            a.peerWantsRing();
            assertThat(a.announceDue()).isTrue();
            ReceiveRing ring = a.next(8192);
            a.announced(ring);
            a.peerLeftRetired();
            assertThat(ring.size).isEqualTo(RING);
            assertThat(a.announceDue()).as("alone: its whole size").isFalse();
            OfferedRings[] others = new OfferedRings[7];
            for (int i = 0; i < others.length; i++) {
                others[i] = newRings(memory);
                others[i].peerWantsRing();
            }
            // Eight stream now: a's ring is twice the share of 32 KiB. Not more: it stays.
            assertThat(a.announceDue()).isFalse();
            newRings(memory).peerWantsRing();
            // Nine: the share is 16 KiB.
            assertThat(a.announceDue()).isTrue();
            assertThat(a.next(8192)).as("withdrawn").isNull();
            a.announced(null);
            a.peerLeftRetired();
            assertThat(memory.pinned()).isZero();
            // Asked again, it gets its share.
            a.peerWantsRing();
            assertThat(a.announceDue()).isTrue();
            ReceiveRing again = a.next(8192);
            a.announced(again);
            assertThat(again.size).isEqualTo(QUARTER);
            a.release();
            return null;
        });
        assertThat(memory.pinned()).isZero();
        assertThat(regions()).isEqualTo(before);
    }

    @Test
    void connectionsShareTheLoopsRingMemoryAndAWaitingOneGetsARingWhenAnotherIsFreed() throws Exception {
        long before = regions();
        RingMemory memory = new RingMemory(3 * RING / 2);
        onLoop(() -> {
            OfferedRings a = newRings(memory);
            OfferedRings b = newRings(memory);
            OfferedRings c = newRings(memory);
            a.peerWantsRing();
            assertThat(a.announceDue()).isTrue();
            ReceiveRing ringA = a.next(8192);
            a.announced(ringA);
            assertThat(ringA.size).isEqualTo(RING);
            b.peerWantsRing();
            assertThat(b.announceDue()).isTrue();
            ReceiveRing ringB = b.next(8192);
            b.announced(ringB);
            assertThat(ringB.size).as("half of the limit, to the power of two below").isEqualTo(RING / 2);
            assertThat(memory.pinned()).isEqualTo(RING + RING / 2);
            // Nothing is left, so c waits, asking.
            c.peerWantsRing();
            assertThat(c.announceDue()).isFalse();
            // a's ring, once its peer has confirmed it, goes idle and is withdrawn; once the peer has left it, its
            // memory is free for c.
            a.peerLeftRetired();
            assertThat(a.checkIdle()).isTrue();
            assertThat(a.announceDue()).isTrue();
            assertThat(a.next(8192)).isNull();
            a.announced(null);
            assertThat(c.announceDue()).isFalse();
            a.peerLeftRetired();
            assertThat(memory.pinned()).isEqualTo(RING / 2);
            assertThat(c.announceDue()).isTrue();
            ReceiveRing ringC = c.next(8192);
            c.announced(ringC);
            assertThat(ringC.size).as("its share of two").isEqualTo(RING / 2);
            b.release();
            c.release();
            assertThat(memory.pinned()).isZero();
            return null;
        });
        assertThat(regions()).isEqualTo(before);
    }

    @Test
    void returnedSlabsAreDueAsCreditWhenThePeerMayBeShortOfThem() throws Exception {
        long before = regions();
        onLoop(() -> {
            OfferedRings rings = newRings(new RingMemory(4 * RING));
            assertThat(rings.creditsDue()).isFalse();
            assertThat(rings.takeOwed()).isZero();
            rings.peerWantsRing();
            // A peer with 1 KiB slots: a RING message of it fits (1024 - 24) / 4 rkeys, a ring cut into 2 slabs.
            ReceiveRing ring = rings.next(1024);
            rings.announced(ring);
            assertThat(ring.slabs.count()).isEqualTo(2);
            arrive(ring, 0, 100, true);
            arrive(ring, 1, 100, true);
            rings.invalidate(null, 32);
            rings.delivered(ring, 1);
            rings.rebind(null, 32);
            // One of two slabs owed, none left to the writer: due.
            assertThat(rings.creditsDue()).isTrue();
            assertThat(rings.takeOwed()).isEqualTo(0b10);
            assertThat(rings.creditsDue()).isFalse();
            rings.delivered(ring, 0);
            rings.release();
            return null;
        });
        assertThat(regions()).isEqualTo(before);
    }
}
