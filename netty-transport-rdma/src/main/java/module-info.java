/**
 * Netty transport over RDMA reliable-connected queue pairs, calling rdma-core through the FFM API.
 * Run with {@code --enable-native-access=io.netty.contrib.transport.rdma}.
 */
module io.netty.contrib.transport.rdma {
    requires transitive io.netty.common;
    requires transitive io.netty.buffer;
    requires transitive io.netty.transport;
    requires jdk.jfr;
    // Optional: Netty's epoll channels on RDMA loops, when the application has them (EpollHandles).
    requires static io.netty.transport.classes.epoll;
    requires static io.netty.transport.unix.common;

    exports io.netty.contrib.channel.rdma;
}
