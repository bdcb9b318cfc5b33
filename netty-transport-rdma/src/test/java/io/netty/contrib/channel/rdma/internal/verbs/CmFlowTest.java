package io.netty.contrib.channel.rdma.internal.verbs;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.List;

import static io.netty.contrib.channel.rdma.internal.verbs.ConnectedPair.TIMEOUT_MILLIS;
import static io.netty.contrib.channel.rdma.internal.verbs.ConnectedPair.expect;
import static org.assertj.core.api.Assertions.assertThat;

/** rdma_cm paths besides the happy connect: reject with private data, id migration, address lookup. */
@ExtendWith(SoftwareDeviceExtension.class)
class CmFlowTest {

    @Test
    void rejectedConnectionCarriesThePrivateData() {
        InetAddress address = TestAddress.get();
        try (CmEventChannel serverChannel = CmEventChannel.create();
             CmEventChannel clientChannel = CmEventChannel.create()) {
            CmId listener = serverChannel.createId();
            listener.setReuseAddress(true);
            listener.bind(new InetSocketAddress(address, 0));
            listener.listen(1);
            CmId client = clientChannel.createId();
            client.resolveAddr(null, new InetSocketAddress(address, listener.localAddress().getPort()),
                    TIMEOUT_MILLIS);
            expect(clientChannel, CmEventType.ADDR_RESOLVED).ack();
            client.resolveRoute(TIMEOUT_MILLIS);
            expect(clientChannel, CmEventType.ROUTE_RESOLVED).ack();
            VerbsContext context = client.verbs();
            ProtectionDomain pd = context.allocPd();
            CompletionQueue cq = context.createCq(4, null, 0);
            QueuePair qp = client.createQp(pd, new QpInitAttributes(cq, cq, null, 2, 2, 1, 1, 0, false));
            client.connect(ConnParam.of(new byte[] {1, 2, 3}));

            CmEvent request = expect(serverChannel, CmEventType.CONNECT_REQUEST);
            CmId incoming = request.id();
            request.ack();
            incoming.reject("go away".getBytes(StandardCharsets.US_ASCII));
            CmEvent rejected = expect(clientChannel, CmEventType.REJECTED);
            assertThat(rejected.id()).isSameAs(client);
            assertThat(new String(rejected.privateData(), StandardCharsets.US_ASCII)).startsWith("go away");
            rejected.ack();

            incoming.close();
            qp.close();
            cq.close();
            pd.close();
            context.close();
            client.close();
            listener.close();
        }
    }

    @Test
    void migratedIdReportsOnItsNewChannel() {
        try (CmEventChannel first = CmEventChannel.create(); CmEventChannel second = CmEventChannel.create()) {
            CmId id = first.createId();
            id.migrate(second);
            assertThat(id.channel()).isSameAs(second);
            first.close();
            id.resolveAddr(null, new InetSocketAddress(TestAddress.get(), 4791), TIMEOUT_MILLIS);
            CmEvent event = expect(second, CmEventType.ADDR_RESOLVED);
            assertThat(event.id()).isSameAs(id);
            event.ack();
            assertThat(second.await(0)).isFalse();
            second.setNonBlocking(true);
            assertThat(second.getEvent()).isNull();
            id.close();
        }
    }

    @Test
    void addressInfoResolvesNumericAddresses() {
        List<InetSocketAddress> addresses = CmId.getAddrInfo("127.0.0.1", "7471", false);
        assertThat(addresses).contains(new InetSocketAddress(InetAddress.getLoopbackAddress(), 7471));
    }
}
