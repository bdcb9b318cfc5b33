package io.netty.contrib.rdma.vertx;

import io.netty.contrib.channel.rdma.RdmaIoHandlerConfig;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import io.vertx.core.Vertx;
import io.vertx.core.VertxOptions;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.HttpClientAgent;
import io.vertx.core.http.HttpClientRequest;
import io.vertx.core.http.HttpClientResponse;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.http.HttpServer;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * What made {@link RdmaTransportTest}'s HTTP echo hang now and then, shown on Vert.x's NIO transport and on
 * {@link RdmaTransport} alike: it is Vert.x's HTTP client (5.0.7), not the transport.
 *
 * <p>{@code HttpClientResponseImpl} hands a chunk or the end of a response to its body handler only if one exists
 * when the chunk or the end comes; {@code body()} creates that handler. A chain built on a thread that is not the
 * event loop, {@code request.compose(req -> req.send()).compose(resp -> resp.body())}, attaches its last step from
 * that thread. If the request is already there, the first step goes to the loop as a task; should that thread then
 * lose its core before it attaches the last step (on a two-core machine it does: the loop it just woke up, and the
 * peer's, run the whole exchange meanwhile; seen in 2 to 3 ms gaps, with blocking RDMA loops and with NIO's, but
 * rarely with spinning loops, which need no wake-up), the whole response, head, chunks and end, has been handled
 * when the step is attached. The step then runs as a later task of the loop, and the {@code body()} it calls waits
 * for an end that has already gone by. The transport delivered everything and every queue is empty, which is what
 * the hang looked like.
 *
 * <p>Asking for the body in the step that receives the response, {@code req.send().compose(resp -> resp.body())},
 * runs {@code body()} on the loop while it handles the response head, before any chunk. Vert.x's maintainers name
 * the flat chain racy (eclipse-vertx/vert.x#4705, and #3517 for why {@code request} returns the request). A change
 * after 5.0.7 completes a late {@code body()} instead of leaving it pending (eclipse-vertx/vert.x#6064, #6071 for
 * 5.0); the chunks it missed are a separate issue (eclipse-vertx/vert.x#5904). If this test fails after a Vert.x
 * upgrade, the mechanism has changed: look again at whether the nested chain is still needed.
 */
@Timeout(120)
class VertxResponseBodyRaceTest {
    private static final String BODY = "x".repeat(100);

    enum Transports {
        NIO, RDMA
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(Transports.class)
    void aBodyAskedForAfterTheResponseEndedNeverArrives(Transports transport) throws Exception {
        Vertx vertx = vertx(transport);
        try {
            HttpServer server = await(vertx.createHttpServer().requestHandler(req -> req.response().end(BODY))
                    .listen(0, "127.0.0.1"));
            HttpClientAgent client = vertx.createHttpClient();
            Future<HttpClientResponse> response = client.request(HttpMethod.GET, server.actualPort(), "127.0.0.1", "/")
                    .compose(HttpClientRequest::send);
            assertThat(await(response).statusCode()).isEqualTo(200);
            // Head, body and end came in one message, handled in one task of the only loop: once a task queued
            // after it has run, the response has ended. The pause leaves room for anything still in flight.
            barrier(vertx);
            Thread.sleep(200);
            barrier(vertx);
            // The flat chain's last step, attached from this thread after the end, as when this thread is slow.
            Future<Buffer> late = response.compose(HttpClientResponse::body);
            // On Vert.x 5.0.7 it never completes: the chunk and the end went by while the response had no body
            // handler.
            Buffer got = null;
            try {
                got = late.toCompletionStage().toCompletableFuture().get(2, TimeUnit.SECONDS);
            } catch (TimeoutException | ExecutionException e) {
                // not the body
            }
            assertThat(got).as("the body asked for after the response ended").isNotEqualTo(Buffer.buffer(BODY));
            await(client.close());
            await(server.close());
        } finally {
            await(vertx.close());
        }
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(Transports.class)
    void aBodyAskedForInTheStepThatGetsTheResponseArrivesHoweverSlowTheCaller(Transports transport)
            throws Exception {
        Vertx vertx = vertx(transport);
        try {
            HttpServer server = await(vertx.createHttpServer().requestHandler(req -> req.response().end(BODY))
                    .listen(0, "127.0.0.1"));
            HttpClientAgent client = vertx.createHttpClient();
            for (int i = 0; i < 3; i++) {
                Future<HttpClientRequest> request = client.request(HttpMethod.GET, server.actualPort(), "127.0.0.1",
                        "/");
                // This thread is slow: the request is there before the next step is attached, and after that
                // step the whole exchange may be over before this thread runs again.
                Thread.sleep(100);
                Future<Buffer> body = request.compose(req -> req.send().compose(HttpClientResponse::body));
                Thread.sleep(100);
                assertThat(await(body)).isEqualTo(Buffer.buffer(BODY));
            }
            await(client.close());
            await(server.close());
        } finally {
            await(vertx.close());
        }
    }

    /** One event loop, so that the client, the server and the test's contexts share it. */
    private static Vertx vertx(Transports transport) {
        var builder = Vertx.builder().with(new VertxOptions().setEventLoopPoolSize(1));
        return switch (transport) {
            case NIO -> builder.withTransport(io.vertx.core.transport.Transport.NIO).build();
            case RDMA -> builder.withTransport(RdmaTransport.transport(new RdmaIoHandlerConfig().spinNanos(0)))
                    .build();
        };
    }

    /** Returns once the (only) event loop has run a task queued now. */
    private static void barrier(Vertx vertx) throws Exception {
        Promise<Void> done = Promise.promise();
        vertx.getOrCreateContext().runOnContext(v -> done.complete());
        await(done.future());
    }

    private static <T> T await(Future<T> future) throws Exception {
        return future.toCompletionStage().toCompletableFuture().get(30, TimeUnit.SECONDS);
    }
}
