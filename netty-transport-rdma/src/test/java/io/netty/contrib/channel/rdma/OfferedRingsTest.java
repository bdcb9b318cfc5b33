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
 * for, withdrawn when idle, replaced when held buffers pin half of one, and each freed exactly when nothing can
 * write or read it any more.
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
        self[0] = new OfferedRings(device.pd(), memory, RING, QUARTER, true, 16, device.allocator(), loop,
                (r, seq) -> self[0].bufferReleased(r, seq));
        return self[0];
    }

    private static <T> T onLoop(Callable<T> task) throws Exception {
        return loop.submit(task).get();
    }

    private static long regions() {
        return SoftwareRdma.hasObjectCounts() ? SoftwareRdma.objectCounts().get("mr") : 0;
    }

    /** A write of {@code length} bytes of generation {@code gen} landing in {@code r}: its sequence number. */
    private static long arrive(ReceiveRing r, int length, boolean gen) {
        long seq = r.releases.arrive(Immediate.encode(length, false, gen));
        r.arrivals++;
        r.refs.incrementAndGet(); // as the connection does while the write waits to be read
        return seq;
    }

    @Test
    void aRingIsOfferedWhenAskedForAndWithdrawnWhenIdle() throws Exception {
        long before = regions();
        onLoop(() -> {
            OfferedRings rings = newRings();
            assertThat(rings.announceDue()).isFalse();
            rings.peerWantsRing();
            assertThat(rings.announceDue()).isTrue();
            ReceiveRing first = rings.next();
            rings.announced(first);
            assertThat(rings.current()).isSameAs(first);
            assertThat(rings.announceDue()).isFalse();
            assertThat(first.generation).isTrue();
            assertThat(rings.ringOf(Immediate.encode(100, false, true))).isSameAs(first);
            assertThatThrownBy(() -> rings.ringOf(Immediate.encode(100, false, false)))
                    .isInstanceOf(ProtocolException.class).hasMessageContaining("after the switch");

            // Traffic keeps it; a look with no arrival since the last one withdraws it.
            rings.delivered(first, arrive(first, 1000, true));
            assertThat(rings.checkIdle()).isFalse();
            assertThat(rings.checkIdle()).isTrue();
            assertThat(rings.announceDue()).isTrue();
            assertThat(rings.next()).isNull();
            rings.announced(null);
            assertThat(rings.current()).isNull();
            // Until the peer confirms the RING, its writes may still land in the old ring, and nothing else is
            // announced (one generation bit).
            assertThat(rings.ringOf(Immediate.encode(100, false, true))).isSameAs(first);
            rings.peerWantsRing();
            assertThat(rings.announceDue()).isFalse();
            rings.peerLeftRetired();
            assertThat(first.refs.get()).isZero();
            assertThatThrownBy(() -> rings.ringOf(Immediate.encode(100, false, true)))
                    .isInstanceOf(ProtocolException.class).hasMessageContaining("offers no ring");
            assertThat(rings.announceDue()).isTrue();
            return null;
        });
        assertThat(regions()).isEqualTo(before);
    }

    @Test
    void heldBuffersPinningHalfTheRingBringANewOneAndTheOldLivesUntilTheyAreReleased() throws Exception {
        long before = regions();
        ByteBuf[] held = onLoop(() -> {
            OfferedRings rings = newRings();
            rings.peerWantsRing();
            ReceiveRing first = rings.next();
            rings.announced(first);
            ByteBuf[] bufs = new ByteBuf[2];
            for (int i = 0; i < 2; i++) {
                long seq = arrive(first, QUARTER, true);
                assertThat(rings.mayHold(first, seq)).isTrue();
                bufs[i] = first.heldBuffer(device.allocator(), first.memory.address() + first.releases.lastOffset(),
                        QUARTER, seq);
                rings.unref(first); // the queued write's reference: it was handed over
            }
            assertThat(rings.announceDue()).isTrue();
            ReceiveRing second = rings.next();
            rings.announced(second);
            assertThat(second.generation).isFalse();
            // While a retired ring lives, nothing new is handed over as a buffer: the peer must not be able to
            // pin both rings.
            long seq = arrive(second, 100, false);
            assertThat(rings.mayHold(second, seq)).isFalse();
            rings.delivered(second, seq);
            rings.peerLeftRetired();
            assertThat(first.refs.get()).isEqualTo(2);
            return bufs;
        });
        held[0].release();
        held[1].release();
        onLoop(() -> {
            ReceiveRing second = rings.current();
            long seq = arrive(second, 100, false);
            assertThat(rings.mayHold(second, seq)).isTrue();
            rings.delivered(second, seq);
            rings.release();
            return null;
        });
        assertThat(regions()).isEqualTo(before);
    }

    @Test
    void ringMemorySizesEachNewRingAndGivesNoneWhenTooLittleIsLeft() {
        RingMemory memory = new RingMemory(3 * RING / 2);
        // Nothing pinned: a whole ring. Then at most half of what is left, in pages, down to the minimum.
        assertThat(memory.sizeFor(RING, QUARTER)).isEqualTo(RING);
        memory.reserve(RING);
        assertThat(memory.sizeFor(RING, QUARTER)).isEqualTo(QUARTER);
        memory.reserve(QUARTER);
        assertThat(memory.sizeFor(RING, QUARTER)).isZero();
        assertThat(memory.sizeFor(RING, 4096)).isEqualTo(RING / 8);
        memory.release(RING);
        assertThat(memory.sizeFor(RING, QUARTER)).isEqualTo((3 * RING / 2 - QUARTER) / 2);
        memory.release(QUARTER);
        assertThat(memory.pinned()).isZero();
        // A limit below one ring: the one ring gets all of it; a wanted size below the minimum is not refused.
        assertThat(new RingMemory(RING / 2).sizeFor(RING, QUARTER)).isEqualTo(RING / 2);
        assertThat(memory.sizeFor(8192, QUARTER)).isEqualTo(8192);
        assertThat(new RingMemory(0).sizeFor(RING, QUARTER)).isZero();
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
            ReceiveRing ringA = a.next();
            a.announced(ringA);
            assertThat(ringA.size).isEqualTo(RING);
            b.peerWantsRing();
            assertThat(b.announceDue()).isTrue();
            ReceiveRing ringB = b.next();
            b.announced(ringB);
            assertThat(ringB.size).isEqualTo(QUARTER);
            assertThat(memory.pinned()).isEqualTo(RING + QUARTER);
            // A quarter of a ring is left: half of it is under the minimum, so c waits, asking.
            c.peerWantsRing();
            assertThat(c.announceDue()).isFalse();
            // a's ring goes idle and is withdrawn; once the peer has left it, its memory is free for c.
            assertThat(a.checkIdle()).isTrue();
            assertThat(a.next()).isNull();
            a.announced(null);
            assertThat(c.announceDue()).isFalse();
            a.peerLeftRetired();
            assertThat(memory.pinned()).isEqualTo(QUARTER);
            assertThat(c.announceDue()).isTrue();
            ReceiveRing ringC = c.next();
            c.announced(ringC);
            assertThat(ringC.size).isEqualTo((RING + QUARTER) / 2 & -4096);
            b.release();
            c.release();
            assertThat(memory.pinned()).isZero();
            return null;
        });
        assertThat(regions()).isEqualTo(before);
    }

    @Test
    void freedSpaceIsDueAsCreditWhenThePeerMayBeShortOfRoom() throws Exception {
        long before = regions();
        onLoop(() -> {
            OfferedRings rings = newRings();
            assertThat(rings.creditsDue()).isFalse();
            assertThat(rings.takeOwed()).isZero();
            rings.peerWantsRing();
            ReceiveRing ring = rings.next();
            rings.announced(ring);
            long a = arrive(ring, QUARTER, true);
            long b = arrive(ring, QUARTER, true);
            long c = arrive(ring, QUARTER, true);
            assertThat(rings.creditsDue()).isFalse();
            // Out of order: nothing can be returned before the first write is released.
            rings.delivered(ring, b);
            assertThat(rings.creditsDue()).isFalse();
            rings.delivered(ring, a);
            // Half the ring freed: the writer, as far as it knows, has a quarter left.
            assertThat(rings.creditsDue()).isTrue();
            assertThat(rings.takeOwed()).isEqualTo(2 * QUARTER);
            assertThat(rings.creditsDue()).isFalse();
            rings.delivered(ring, c);
            rings.release();
            return null;
        });
        assertThat(regions()).isEqualTo(before);
    }
}
