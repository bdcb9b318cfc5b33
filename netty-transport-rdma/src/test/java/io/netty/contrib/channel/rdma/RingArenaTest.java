package io.netty.contrib.channel.rdma;

import io.netty.contrib.channel.rdma.internal.memory.PageMode;
import io.netty.contrib.channel.rdma.internal.verbs.IbvAccessFlags;
import io.netty.contrib.channel.rdma.internal.verbs.VerbsContext;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The loop's ring arena on the software device: rings carved from shared blocks registered once without remote
 * access, every ring zeroed when handed out, blocks added within the loop's ring memory and given back when empty
 * (but one), large rings in blocks of their own.
 */
class RingArenaTest {
    private static RdmaDevices.Device device;

    @BeforeAll
    static void device() {
        SoftwareRdma.use();
        RdmaDevices.retain(RdmaIoHandlerConfig.HugePages.AUTO);
        device = RdmaDevices.of(VerbsContext.cmDevices().get(0));
    }

    @AfterAll
    static void close() {
        RdmaDevices.release();
    }

    private static long regions() {
        return SoftwareRdma.hasObjectCounts() ? SoftwareRdma.objectCounts().get("mr") : 0;
    }

    @Test
    void ringsShareABlockRegisteredOnceWithoutRemoteAccessAndComeBackZeroed() {
        long before = regions();
        RingMemory memory = new RingMemory(16 * RingArena.BLOCK);
        RingArena arena = memory.arena(device.pd(), PageMode.AUTO);
        assertThat(arena.fits(1 << 20)).isTrue();
        RingArena.Span a = arena.allocate(1 << 20);
        RingArena.Span b = arena.allocate(100_000);
        assertThat(b.block()).as("one block for both").isSameAs(a.block());
        assertThat(b.size()).as("whole pages").isEqualTo(102_400);
        assertThat(a.mr().access() & (IbvAccessFlags.REMOTE_WRITE | IbvAccessFlags.REMOTE_READ)).isZero();
        assertThat(a.mr().access() & IbvAccessFlags.MW_BIND).isNotZero();
        assertThat(memory.registered()).isEqualTo(RingArena.BLOCK);
        if (SoftwareRdma.hasObjectCounts()) {
            assertThat(regions() - before).isEqualTo(1);
        }
        // What one connection's peer wrote is gone when the span goes to another connection.
        a.memory().fill((byte) 0x5A);
        long offset = a.offset();
        arena.free(a);
        RingArena.Span c = arena.allocate(1 << 20);
        assertThat(c.offset()).as("first fit takes the freed span").isEqualTo(offset);
        for (long i = 0; i < c.size(); i += 4093) {
            assertThat(c.memory().get(ValueLayout.JAVA_BYTE, i)).isZero();
        }
        arena.free(b);
        arena.free(c);
        assertThat(memory.registered()).as("one empty block is kept").isEqualTo(RingArena.BLOCK);
        memory.close();
        assertThat(memory.registered()).isZero();
        assertThat(regions()).isEqualTo(before);
    }

    @Test
    void blocksAreAddedWithinTheLoopsRingMemoryAndGivenBackWhenEmpty() {
        long before = regions();
        RingMemory memory = new RingMemory(2 * RingArena.BLOCK);
        RingArena arena = memory.arena(device.pd(), PageMode.OFF);
        List<RingArena.Span> spans = new ArrayList<>();
        // 128 KiB rings: 32 per block, two blocks at most.
        for (int i = 0; i < 64; i++) {
            assertThat(arena.fits(128 << 10)).isTrue();
            spans.add(arena.allocate(128 << 10));
        }
        assertThat(memory.registered()).isEqualTo(2 * RingArena.BLOCK);
        assertThat(arena.fits(128 << 10)).isFalse();
        assertThatThrownBy(() -> arena.allocate(128 << 10)).isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("no room");
        // Freed in random order, spans coalesce: a whole block fits again.
        List<RingArena.Span> first = new ArrayList<>(spans.subList(0, 32));
        List<RingArena.Span> second = new ArrayList<>(spans.subList(32, 64));
        java.util.Collections.shuffle(first, new Random(7));
        java.util.Collections.shuffle(second, new Random(8));
        for (RingArena.Span s : first) {
            arena.free(s);
        }
        assertThat(memory.registered()).as("the emptied block went, the other stays").isEqualTo(RingArena.BLOCK);
        for (RingArena.Span s : second) {
            arena.free(s);
        }
        assertThat(memory.registered()).as("one empty block is kept").isEqualTo(RingArena.BLOCK);
        assertThat(arena.fits(RingArena.BLOCK)).isTrue();
        // A ring larger than a block has a block of its own (the empty block kept makes room for it within the
        // limit), freed with it.
        RingArena.Span big = arena.allocate(RingArena.BLOCK + 4096);
        assertThat(big.block().size()).isEqualTo(2 * RingArena.BLOCK);
        assertThat(memory.registered()).isEqualTo(2 * RingArena.BLOCK);
        arena.free(big);
        assertThat(memory.registered()).isZero();
        memory.close();
        assertThat(regions()).isEqualTo(before);
    }

    @Test
    void aLimitBelowOneBlockStillAllowsOneBlockAndNoneAtAllWithoutRingMemory() {
        RingMemory small = new RingMemory(256 << 10);
        RingArena arena = small.arena(device.pd(), PageMode.OFF);
        RingArena.Span s = arena.allocate(256 << 10);
        assertThat(small.registered()).isEqualTo(RingArena.BLOCK);
        arena.free(s);
        small.close();
        assertThat(small.registered()).isZero();
        assertThat(new RingMemory(0).arena(device.pd(), PageMode.OFF).fits(4096)).isFalse();
    }
}
