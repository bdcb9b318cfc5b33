package io.netty.contrib.channel.rdma.internal.memory;

import org.junit.jupiter.api.Test;

import java.lang.foreign.ValueLayout;
import java.util.BitSet;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class ChunkTest {
    private static final int PAGE = RegisteredMemoryPool.PAGE_SIZE;
    private final FakeRegistrar registrar = new FakeRegistrar();

    @Test
    void isAlignedTouchedThenRegistered() {
        Chunk huge = Chunk.create(4L << 20, PAGE, registrar, 0, PageMode.AUTO);
        Chunk small = Chunk.create(3 * 4096, 0, registrar, 0, PageMode.AUTO);
        assertThat(huge.address % Chunk.HUGE_PAGE_SIZE).isZero();
        assertThat(small.address % Chunk.OS_PAGE_SIZE).isZero();
        assertThat(registrar.notResidentAtRegistration()).isZero();
        assertThat(huge.lkey).isNotEqualTo(small.lkey);
        assertThat(huge.pageCount).isEqualTo(64);
        assertThat(small.isDedicated()).isTrue();
        huge.free();
        small.free();
        assertThat(registrar.liveRegistrations()).isZero();
        assertThatThrownBy(() -> huge.memory.get(ValueLayout.JAVA_BYTE, 0))
                .isInstanceOf(IllegalStateException.class);
    }

    @Test
    void registrationFailureFreesTheMemory() {
        registrar.failWith(() -> new RuntimeException("ENOMEM"));
        assertThatThrownBy(() -> Chunk.create(1L << 20, PAGE, registrar, 0, PageMode.AUTO))
                .isInstanceOf(MemoryRegistrationException.class)
                .hasMessageStartingWith("memory registration of 1 MiB failed");
    }

    @Test
    void runsAreAlignedToTheirSize() {
        Chunk chunk = Chunk.create(8L << 20, PAGE, registrar, 0, PageMode.AUTO); // 128 pages
        assertThat(chunk.allocatePages(1)).isZero();
        assertThat(chunk.allocatePages(4)).isEqualTo(4);
        assertThat(chunk.allocatePages(2)).isEqualTo(2);
        assertThat(chunk.allocatePages(64)).isEqualTo(64);
        assertThat(chunk.allocatePages(64)).as("0..63 is partly used").isEqualTo(-1);
        assertThat(chunk.allocatePages(1)).isEqualTo(1);
        chunk.freePages(64, 64);
        assertThat(chunk.allocatePages(32)).isEqualTo(32);
        assertThat(chunk.freePages).isEqualTo(128 - 1 - 4 - 2 - 1 - 32);
        chunk.freePages(0, 1);
        chunk.freePages(1, 1);
        chunk.freePages(2, 2);
        chunk.freePages(4, 4);
        chunk.freePages(32, 32);
        assertThat(chunk.isEmpty()).isTrue();
        assertThat(chunk.allocatePages(128)).isZero();
        chunk.free();
    }

    @Test
    void slabHandsOutEverySlotOnce() {
        Chunk chunk = Chunk.create(1L << 20, PAGE, registrar, 0, PageMode.AUTO);
        for (int size : new int[] { 64, 256, 4096, 32768 }) {
            Slab slab = new Slab(chunk, 3, PAGE);
            slab.init(RegisteredMemoryPool.sizeClass(size), size, PAGE);
            BitSet seen = new BitSet();
            int slots = PAGE / size;
            for (int i = 0; i < slots; i++) {
                int offset = slab.allocate();
                assertThat(offset).isBetween(3 * PAGE, 4 * PAGE - size);
                assertThat((offset - 3 * PAGE) % size).isZero();
                assertThat(seen.get(offset)).isFalse();
                seen.set(offset);
            }
            assertThat(slab.isFull()).isTrue();
            slab.free(3 * PAGE + size);
            assertThat(slab.allocate()).isEqualTo(3 * PAGE + size);
            for (int offset = seen.nextSetBit(0); offset >= 0; offset = seen.nextSetBit(offset + 1)) {
                slab.free(offset);
            }
            assertThat(slab.isEmpty()).isTrue();
        }
        chunk.free();
    }

    @Test
    void freedChunksGiveTheirPagesBackToTheSystem() throws Exception {
        // One chunk freed first: with malloc'ed chunks, glibc then keeps blocks of that size in its heaps, and
        // freeing them left them resident.
        Chunk.create(4L << 20, PAGE, registrar, 0, PageMode.AUTO).free();
        long before = residentBytes();
        java.util.List<Chunk> chunks = new java.util.ArrayList<>();
        for (int i = 0; i < 16; i++) {
            chunks.add(Chunk.create(4L << 20, PAGE, registrar, 0, PageMode.AUTO));
        }
        long grown = residentBytes();
        chunks.forEach(Chunk::free);
        long after = residentBytes();
        assertThat(grown - before).as("resident growth of 64 MiB of touched chunks").isGreaterThan(60L << 20);
        assertThat(grown - after).as("resident bytes given back by freeing them").isGreaterThan(60L << 20);
    }

    private static long residentBytes() throws java.io.IOException {
        String[] statm = java.nio.file.Files.readString(java.nio.file.Path.of("/proc/self/statm")).trim().split(" ");
        return Long.parseLong(statm[1]) * 4096;
    }
}
