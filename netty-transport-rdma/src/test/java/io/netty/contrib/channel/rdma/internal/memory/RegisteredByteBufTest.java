package io.netty.contrib.channel.rdma.internal.memory;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.ByteBufUtil;
import io.netty.buffer.CompositeByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.buffer.UnpooledByteBufAllocator;
import io.netty.util.IllegalReferenceCountException;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.Pipe;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class RegisteredByteBufTest {
    private static final byte[] DATA = "registered memory, sent from where it lies".getBytes(StandardCharsets.US_ASCII);

    private final FakeRegistrar registrar = new FakeRegistrar();
    private final RegisteredMemoryPool pool = new RegisteredMemoryPool(registrar, 1 << 20, 256 << 10, 1);
    private final ByteBufAllocator alloc = UnpooledByteBufAllocator.DEFAULT;

    @AfterEach
    void close() {
        assertThat(pool.usedMemory()).isZero();
        pool.close();
    }

    private RegisteredByteBuf buffer(int capacity) {
        return pool.allocate(alloc, capacity, Integer.MAX_VALUE);
    }

    @Test
    void copiesToAndFromEveryKindOfBuffer() {
        ByteBuf src = buffer(64).writeBytes(DATA);
        ByteBuf[] targets = { buffer(64), Unpooled.buffer(64), Unpooled.directBuffer(64),
                Unpooled.compositeBuffer().addComponents(true, Unpooled.directBuffer(10).writeZero(10),
                        Unpooled.buffer(54).writeZero(54)) };
        for (ByteBuf target : targets) {
            src.getBytes(0, target, 0, DATA.length);
            target.writerIndex(DATA.length);
            assertThat(ByteBufUtil.getBytes(target)).as(target.toString()).isEqualTo(DATA);

            ByteBuf back = buffer(64);
            back.setBytes(0, target, 0, DATA.length).writerIndex(DATA.length);
            assertThat(ByteBufUtil.getBytes(back)).isEqualTo(DATA);
            assertThat(ByteBufUtil.equals(back, target)).isTrue();
            back.release();
            target.release();
        }
        src.release();
    }

    @Test
    void copiesToAndFromArraysAndNioBuffers() {
        ByteBuf buf = buffer(DATA.length).writeBytes(DATA, 1, DATA.length - 1);
        byte[] array = new byte[DATA.length + 2];
        buf.getBytes(0, array, 2, DATA.length - 1);
        assertThat(new String(array, 2, DATA.length - 1, StandardCharsets.US_ASCII)).isEqualTo(
                new String(DATA, 1, DATA.length - 1, StandardCharsets.US_ASCII));

        for (ByteBuffer nio : new ByteBuffer[] { ByteBuffer.allocate(100), ByteBuffer.allocateDirect(100) }) {
            nio.position(5).limit(5 + DATA.length - 4);
            buf.getBytes(3, nio);
            assertThat(nio.hasRemaining()).isFalse();
            nio.flip().position(5);
            ByteBuf back = buffer(100);
            back.writeBytes(nio);
            assertThat(nio.hasRemaining()).isFalse();
            assertThat(back.toString(StandardCharsets.US_ASCII)).isEqualTo(
                    new String(DATA, 4, DATA.length - 4, StandardCharsets.US_ASCII));
            back.release();
        }
        assertThatThrownBy(() -> buf.getBytes(1, new byte[DATA.length])).isInstanceOf(IndexOutOfBoundsException.class);
        buf.release();
    }

    @Test
    void nioViewsShareTheRegisteredMemory() {
        RegisteredByteBuf buf = buffer(32);
        buf.writeLong(7);
        ByteBuffer view = buf.nioBuffer(0, 8);
        assertThat(view.isDirect()).isTrue();
        assertThat(view.order()).isEqualTo(ByteOrder.BIG_ENDIAN);
        assertThat(view.getLong(0)).isEqualTo(7);
        view.putLong(0, 8);
        assertThat(buf.getLong(0)).isEqualTo(8);
        assertThat(buf.nioBufferCount()).isEqualTo(1);
        assertThat(buf.nioBuffers(2, 4)[0].remaining()).isEqualTo(4);
        ByteBuffer internal = buf.internalNioBuffer(4, 4);
        assertThat(internal.position()).isEqualTo(4);
        assertThat(internal.remaining()).isEqualTo(4);
        assertThat(internal.getInt()).isEqualTo(8);
        assertThat(buf.isContiguous()).isTrue();
        assertThat(buf.hasArray()).isFalse();
        assertThat(registrar.covers(buf.lkey(), buf.memoryAddress(), buf.capacity())).isTrue();
        buf.release();
    }

    @Test
    void streamsAndChannels(@TempDir Path dir) throws Exception {
        ByteBuf buf = buffer(100);
        assertThat(buf.writeBytes(new ByteArrayInputStream(DATA), DATA.length)).isEqualTo(DATA.length);
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        buf.getBytes(0, out, DATA.length);
        assertThat(out.toByteArray()).isEqualTo(DATA);
        assertThat(buf.setBytes(0, new ByteArrayInputStream(new byte[0]), 10)).isEqualTo(-1);

        Pipe pipe = Pipe.open();
        assertThat(buf.getBytes(0, pipe.sink(), DATA.length)).isEqualTo(DATA.length);
        ByteBuf piped = buffer(100);
        assertThat(piped.writeBytes(pipe.source(), 100)).isEqualTo(DATA.length);
        assertThat(ByteBufUtil.getBytes(piped)).isEqualTo(DATA);
        piped.release();
        pipe.sink().close();
        ByteBuf end = buffer(1);
        assertThat(end.setBytes(0, pipe.source(), 1)).as("end of stream").isEqualTo(-1);
        end.release();
        pipe.source().close();

        Path file = dir.resolve("data");
        try (FileChannel channel = FileChannel.open(file, StandardOpenOption.CREATE, StandardOpenOption.WRITE,
                StandardOpenOption.READ)) {
            assertThat(buf.getBytes(0, channel, 3, DATA.length)).isEqualTo(DATA.length);
            ByteBuf in = buffer(100);
            assertThat(in.setBytes(0, channel, 3, DATA.length)).isEqualTo(DATA.length);
            in.writerIndex(DATA.length);
            assertThat(ByteBufUtil.getBytes(in)).isEqualTo(DATA);
            in.release();
        }
        assertThat(Files.readAllBytes(file)).endsWith(DATA);
        buf.release();
    }

    @Test
    void behavesLikeAnyNettyBuffer() {
        ByteBuf buf = buffer(16);
        buf.writeCharSequence("héllo", StandardCharsets.UTF_8);
        assertThat(buf.toString(StandardCharsets.UTF_8)).isEqualTo("héllo");
        assertThat(buf.indexOf(0, buf.writerIndex(), (byte) 'l')).isEqualTo(3);
        assertThat(buf.forEachByte(b -> b != 'o')).isEqualTo(5);
        ByteBuf copy = buf.copy();
        assertThat(copy).isEqualTo(buf);
        assertThat(copy).isNotSameAs(buf);
        copy.release();
        assertThat(ByteBufUtil.hexDump(buf, 0, 1)).isEqualTo("68");
        @SuppressWarnings("deprecation")
        ByteBuf swapped = buf.order(ByteOrder.LITTLE_ENDIAN);
        buf.setShort(0, 0x0102);
        assertThat(swapped.getShort(0)).isEqualTo((short) 0x0201);
        assertThat(buf.isDirect()).isTrue();
        assertThat(buf.alloc()).isSameAs(alloc);
        assertThatThrownBy(() -> buf.capacity(-1))
                .isInstanceOf(IllegalArgumentException.class);
        assertThat(buf.release()).isTrue();
        assertThatThrownBy(() -> buf.getByte(0)).isInstanceOf(IllegalReferenceCountException.class);
        assertThatThrownBy(buf::memoryAddress).isInstanceOf(IllegalReferenceCountException.class);
    }

    @Test
    void recycledBuffersStartClean() {
        RegisteredByteBuf first = pool.allocate(alloc, 100, 200);
        first.writeInt(5).readByte();
        first.markReaderIndex();
        first.release();
        RegisteredByteBuf second = pool.allocate(alloc, 10, 300);
        assertThat(second.refCnt()).isEqualTo(1);
        assertThat(second.readerIndex()).isZero();
        assertThat(second.writerIndex()).isZero();
        assertThat(second.capacity()).isEqualTo(10);
        assertThat(second.maxCapacity()).isEqualTo(300);
        second.resetReaderIndex();
        assertThat(second.readerIndex()).isZero();
        assertThatThrownBy(() -> second.capacity(301)).isInstanceOf(IllegalArgumentException.class);
        second.release();
    }

    @Test
    void compositeOfRegisteredBuffers() {
        CompositeByteBuf composite = Unpooled.compositeBuffer();
        composite.addComponents(true, buffer(8).writeLong(1), buffer(8).writeLong(2));
        assertThat(composite.nioBufferCount()).isEqualTo(2);
        assertThat(composite.readLong()).isEqualTo(1);
        assertThat(composite.readLong()).isEqualTo(2);
        ByteBuf flat = buffer(16).writeBytes(composite.readerIndex(0));
        assertThat(flat.getLong(8)).isEqualTo(2);
        flat.release();
        composite.release();
    }
}
