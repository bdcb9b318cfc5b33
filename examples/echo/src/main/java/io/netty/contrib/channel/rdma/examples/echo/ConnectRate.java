package io.netty.contrib.channel.rdma.examples.echo;

import io.netty.bootstrap.Bootstrap;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelHandler;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;

import java.util.ArrayList;
import java.util.List;

/**
 * Connection set-up rate against an {@link EchoServer}: opens {@code --count} connections in waves of
 * {@code --concurrency} concurrent connects, keeps all of them open until the last is up, prints connections
 * per second, then closes them. Exits 0 only when every connect succeeded.
 *
 * <pre>
 * java --enable-native-access=ALL-UNNAMED -cp ... ConnectRate [--address 127.0.0.1] [--port 7474]
 *      [--count 10000] [--concurrency 200] [--threads 1]
 * </pre>
 */
public final class ConnectRate {
    private ConnectRate() {
    }

    /** The connections carry nothing: one handler serves them all. */
    @ChannelHandler.Sharable
    private static final class Idle extends ChannelInboundHandlerAdapter {
    }

    public static void main(String[] args) throws Exception {
        Options options = Options.parse(args);
        options.selectDevice();
        System.exit(run(options) ? 0 : 1);
    }

    static boolean run(Options o) throws InterruptedException {
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(o.threads, o.ioHandlerFactory());
        List<Channel> open = new ArrayList<>(o.count);
        try {
            Bootstrap b = new Bootstrap().group(group).channel(o.channelClass())
                    .handler(new Idle());
            long start = System.nanoTime();
            for (int base = 0; base < o.count; base += o.concurrency) {
                int n = Math.min(o.concurrency, o.count - base);
                List<ChannelFuture> wave = new ArrayList<>(n);
                for (int i = 0; i < n; i++) {
                    wave.add(b.connect(o.address, o.port));
                }
                for (ChannelFuture f : wave) {
                    if (!f.await(60_000) || !f.isSuccess()) {
                        System.err.printf("connect %d of %d failed: %s%n", open.size() + 1, o.count,
                                f.isDone() ? f.cause() : "timed out after 60 s");
                        return false;
                    }
                    open.add(f.channel());
                }
            }
            double seconds = (System.nanoTime() - start) / 1e9;
            System.out.printf("%d connections in waves of %d: %.0f connections/s (%.2f s)%n", o.count,
                    o.concurrency, o.count / seconds, seconds);
            return true;
        } finally {
            for (Channel ch : open) {
                ch.close();
            }
            for (Channel ch : open) {
                ch.closeFuture().await(10_000);
            }
            group.shutdownGracefully().await(10_000);
        }
    }
}
