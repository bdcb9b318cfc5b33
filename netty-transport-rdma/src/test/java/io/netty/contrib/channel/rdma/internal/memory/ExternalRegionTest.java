package io.netty.contrib.channel.rdma.internal.memory;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.UnpooledByteBufAllocator;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class ExternalRegionTest {
    private final FakeRegistrar registrar = new FakeRegistrar();
    private final RegisteredMemoryPool pool = new RegisteredMemoryPool(registrar, 1 << 20, 64 << 10, 1);
    private final Arena arena = Arena.ofConfined();
    private final MemorySegment memory = arena.allocate(16384, 4096);
    private final List<Long> released = new ArrayList<>();
    private final ExternalRegion region = new ExternalRegion(memory, 0x77, pool) {
        @Override
        protected void released(long token) {
            released.add(token);
        }
    };

    @AfterEach
    void tearDown() {
        pool.close();
        arena.close();
    }

    @Test
    void bufferReadsTheRegionInPlaceAndReportsItsReleaseOnce() {
        for (int i = 0; i < 100; i++) {
            memory.set(ValueLayout.JAVA_BYTE, 4096 + i, (byte) i);
        }
        ByteBuf buf = region.buffer(UnpooledByteBufAllocator.DEFAULT, 4096, 100, 7);
        assertThat(buf.readableBytes()).isEqualTo(100);
        assertThat(buf.memoryAddress()).isEqualTo(memory.address() + 4096);
        assertThat(buf.getByte(99)).isEqualTo((byte) 99);
        assertThat(RegisteredBuffer.lkey(buf, pool)).isEqualTo(0x77);
        assertThat(RegisteredBuffer.lkey(buf.slice(10, 20), pool)).isEqualTo(0x77);

        ByteBuf extra = buf.retain();
        buf.release();
        assertThat(released).isEmpty();
        extra.release();
        assertThat(released).containsExactly(7L);
        assertThat(pool.usedMemory()).isZero();
    }

    @Test
    void growingMovesTheBytesIntoThePoolAndLetsGoOfTheRegion() {
        memory.set(ValueLayout.JAVA_BYTE, 0, (byte) 42);
        ByteBuf buf = region.buffer(UnpooledByteBufAllocator.DEFAULT, 0, 10, 3);
        buf.writeLong(1234L);
        assertThat(released).containsExactly(3L);
        assertThat(buf.memoryAddress()).isNotEqualTo(memory.address());
        assertThat(buf.getByte(0)).isEqualTo((byte) 42);
        assertThat(buf.getLong(10)).isEqualTo(1234L);
        assertThat(pool.usedMemory()).isPositive();
        buf.release();
        assertThat(released).containsExactly(3L);
        assertThat(pool.usedMemory()).isZero();
    }

    @Test
    void rangeOutsideTheRegionIsRefused() {
        assertThatThrownBy(() -> region.buffer(UnpooledByteBufAllocator.DEFAULT, 16000, 1000, 1))
                .isInstanceOf(IndexOutOfBoundsException.class);
    }
}
