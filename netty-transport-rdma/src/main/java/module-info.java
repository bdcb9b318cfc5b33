/**
 * Netty transport over RDMA reliable-connected queue pairs, calling rdma-core through the FFM API.
 * Run with {@code --enable-native-access=io.netty.contrib.transport.rdma}.
 */
module io.netty.contrib.transport.rdma {
    requires transitive io.netty.common;
    requires transitive io.netty.buffer;
    requires transitive io.netty.transport;
    requires jdk.jfr;

    exports io.netty.contrib.channel.rdma;
}
