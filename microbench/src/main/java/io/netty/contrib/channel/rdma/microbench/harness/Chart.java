package io.netty.contrib.channel.rdma.microbench.harness;

import io.netty.contrib.channel.rdma.microbench.harness.Results.Series;

import javax.imageio.ImageIO;
import java.awt.BasicStroke;
import java.awt.Color;
import java.awt.Font;
import java.awt.FontMetrics;
import java.awt.Graphics2D;
import java.awt.RenderingHints;
import java.awt.image.BufferedImage;
import java.io.IOException;
import java.math.BigDecimal;
import java.math.MathContext;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * The chart of a run, drawn with Java2D: echo round trips (bar p50, tick p99, whisker to p99.9) and throughput
 * per connection count, by message size, one colour per transport, log scales.
 */
final class Chart {
    private static final int WIDTH = 1200;
    private static final int PANEL_HEIGHT = 330;
    private static final int LEFT = 80;
    private static final int RIGHT = 20;
    private static final Map<Series, Color> COLORS = Map.of(
            Results.RDMA_ADAPTIVE, new Color(0x1f77b4),
            Results.RDMA_BUSY_POLL, new Color(0x17becf),
            Results.VERBS_SEND_LAT, new Color(0x2ca02c),
            Results.VERBS_SEND_LAT_EVENTS, new Color(0x8c564b),
            Results.VERBS_SEND_BW, new Color(0x2ca02c),
            Results.VERBS_WRITE_BW, new Color(0x98df8a),
            Results.EPOLL, new Color(0xff7f0e),
            Results.NIO, new Color(0xd62728));

    /** What one bar shows. */
    private record Bar(double value, Double tick, Double whisker) {
    }

    private interface Values {
        Bar of(Series s, int size);
    }

    private Chart() {
    }

    static void write(Results r, String subtitle, Path file) throws IOException {
        System.setProperty("java.awt.headless", "true");
        List<Integer> conns = r.throughputConnections();
        int panels = 1 + conns.size();
        int height = 70 + panels * PANEL_HEIGHT + 60;
        BufferedImage image = new BufferedImage(WIDTH, height, BufferedImage.TYPE_INT_RGB);
        Graphics2D g = image.createGraphics();
        try {
            g.setRenderingHint(RenderingHints.KEY_ANTIALIASING, RenderingHints.VALUE_ANTIALIAS_ON);
            g.setRenderingHint(RenderingHints.KEY_TEXT_ANTIALIASING, RenderingHints.VALUE_TEXT_ANTIALIAS_ON);
            g.setColor(Color.WHITE);
            g.fillRect(0, 0, WIDTH, height);
            g.setColor(Color.BLACK);
            g.setFont(new Font(Font.SANS_SERIF, Font.BOLD, 18));
            g.drawString("netty-transport-rdma: RdmaChannel on the software RDMA device vs raw verbs and TCP", LEFT, 30);
            g.setFont(new Font(Font.SANS_SERIF, Font.PLAIN, 13));
            g.drawString(subtitle, LEFT, 52);

            int top = 70;
            panel(g, r, top, "Echo round trip, µs (log): bar p50, tick p99, line to p99.9", Results.LATENCY,
                    (s, size) -> {
                        Double p50 = r.get(s, size, 1, "rtt_p50");
                        return p50 == null ? null
                                : new Bar(p50, r.get(s, size, 1, "rtt_p99"), r.get(s, size, 1, "rtt_p99_9"));
                    });
            for (int c : conns) {
                top += PANEL_HEIGHT;
                panel(g, r, top, "Streaming throughput, GB/s (log), " + c + " connection" + (c == 1 ? "" : "s"),
                        Results.THROUGHPUT, (s, size) -> {
                            Double v = r.get(s, size, c, "throughput_bytes");
                            return v == null ? null : new Bar(v, null, null);
                        });
            }
            legend(g, r, top + PANEL_HEIGHT + 10);
        } finally {
            g.dispose();
        }
        ImageIO.write(image, "png", file.toFile());
    }

    private static void panel(Graphics2D g, Results r, int top, String title, List<Series> all, Values values) {
        List<Series> series = new ArrayList<>();
        for (Series s : all) {
            if (r.has(s)) {
                series.add(s);
            }
        }
        List<Integer> sizes = r.sizes();
        double min = Double.MAX_VALUE;
        double max = 0;
        for (Series s : series) {
            for (int size : sizes) {
                Bar bar = values.of(s, size);
                if (bar != null && bar.value > 0) {
                    min = Math.min(min, bar.value);
                    max = Math.max(max, bar.whisker != null ? Math.max(bar.value, bar.whisker) : bar.value);
                }
            }
        }
        int plotTop = top + 30;
        int plotBottom = top + PANEL_HEIGHT - 45;
        int plotLeft = LEFT;
        int plotRight = WIDTH - RIGHT;
        g.setColor(Color.BLACK);
        g.setFont(new Font(Font.SANS_SERIF, Font.BOLD, 14));
        g.drawString(title, plotLeft, top + 18);
        if (max == 0) {
            g.setFont(new Font(Font.SANS_SERIF, Font.ITALIC, 13));
            g.drawString("not measured", plotLeft, plotTop + 40);
            return;
        }
        int lowDecade = (int) Math.floor(Math.log10(min));
        int highDecade = (int) Math.ceil(Math.log10(max));
        if (highDecade == lowDecade) {
            highDecade++;
        }
        double lo = lowDecade;
        double hi = highDecade;
        g.setFont(new Font(Font.SANS_SERIF, Font.PLAIN, 12));
        FontMetrics fm = g.getFontMetrics();
        for (int d = lowDecade; d <= highDecade; d++) {
            for (int m : new int[] {1, 2, 5}) {
                double v = m * Math.pow(10, d);
                if (Math.log10(v) > hi + 1e-9) {
                    continue;
                }
                int y = y(v, lo, hi, plotTop, plotBottom);
                g.setColor(m == 1 ? new Color(0xbbbbbb) : new Color(0xe6e6e6));
                g.drawLine(plotLeft, y, plotRight, y);
                g.setColor(Color.DARK_GRAY);
                String label = axisLabel(v);
                g.drawString(label, plotLeft - 6 - fm.stringWidth(label), y + 4);
            }
        }
        g.setColor(Color.BLACK);
        g.drawLine(plotLeft, plotBottom, plotRight, plotBottom);

        int groupWidth = (plotRight - plotLeft) / Math.max(1, sizes.size());
        int barWidth = Math.min(40, Math.max(4, (groupWidth - 30) / Math.max(1, series.size())));
        for (int i = 0; i < sizes.size(); i++) {
            int size = sizes.get(i);
            int groupLeft = plotLeft + i * groupWidth + (groupWidth - barWidth * series.size()) / 2;
            String name = Results.sizeName(size);
            g.setColor(Color.BLACK);
            g.drawString(name, plotLeft + i * groupWidth + (groupWidth - fm.stringWidth(name)) / 2, plotBottom + 18);
            for (int j = 0; j < series.size(); j++) {
                Series s = series.get(j);
                Bar bar = values.of(s, size);
                if (bar == null || bar.value <= 0) {
                    continue;
                }
                int x = groupLeft + j * barWidth;
                int y = y(bar.value, lo, hi, plotTop, plotBottom);
                g.setColor(COLORS.getOrDefault(s, Color.GRAY));
                g.fillRect(x + 1, y, barWidth - 2, plotBottom - y);
                int cx = x + barWidth / 2;
                g.setColor(Color.BLACK);
                if (bar.whisker != null && bar.whisker > bar.value) {
                    g.setStroke(new BasicStroke(1.5f));
                    g.drawLine(cx, y, cx, y(bar.whisker, lo, hi, plotTop, plotBottom));
                }
                if (bar.tick != null) {
                    int ty = y(bar.tick, lo, hi, plotTop, plotBottom);
                    g.setStroke(new BasicStroke(2f));
                    g.drawLine(cx - barWidth / 4, ty, cx + barWidth / 4, ty);
                }
                g.setStroke(new BasicStroke(1f));
            }
        }
    }

    private static void legend(Graphics2D g, Results r, int top) {
        g.setFont(new Font(Font.SANS_SERIF, Font.PLAIN, 13));
        FontMetrics fm = g.getFontMetrics();
        record Entry(Color color, String label, boolean shown) {
        }
        List<Entry> entries = List.of(
                new Entry(COLORS.get(Results.RDMA_ADAPTIVE), Results.RDMA_ADAPTIVE.label(), r.has(Results.RDMA_ADAPTIVE)),
                new Entry(COLORS.get(Results.RDMA_BUSY_POLL), Results.RDMA_BUSY_POLL.label(),
                        r.has(Results.RDMA_BUSY_POLL)),
                new Entry(COLORS.get(Results.VERBS_SEND_LAT), "raw verbs SEND (ib_send_lat, ib_send_bw)",
                        r.has(Results.VERBS_SEND_LAT) || r.has(Results.VERBS_SEND_BW)),
                new Entry(COLORS.get(Results.VERBS_SEND_LAT_EVENTS), "raw verbs SEND, events (ib_send_lat -e)",
                        r.has(Results.VERBS_SEND_LAT_EVENTS)),
                new Entry(COLORS.get(Results.VERBS_WRITE_BW), "raw verbs WRITE (ib_write_bw)",
                        r.has(Results.VERBS_WRITE_BW)),
                new Entry(COLORS.get(Results.EPOLL), Results.EPOLL.label(), r.has(Results.EPOLL)),
                new Entry(COLORS.get(Results.NIO), Results.NIO.label(), r.has(Results.NIO)));
        int x = LEFT;
        for (Entry e : entries) {
            if (!e.shown()) {
                continue;
            }
            int width = 22 + fm.stringWidth(e.label()) + 24;
            if (x + width > WIDTH - RIGHT) {
                x = LEFT;
                top += 22;
            }
            g.setColor(e.color());
            g.fillRect(x, top, 16, 14);
            g.setColor(Color.BLACK);
            g.drawString(e.label(), x + 22, top + 12);
            x += width;
        }
    }

    private static int y(double v, double lo, double hi, int top, int bottom) {
        double f = (Math.log10(v) - lo) / (hi - lo);
        f = Math.max(0, Math.min(1, f));
        return (int) Math.round(bottom - f * (bottom - top));
    }

    private static String axisLabel(double v) {
        if (v >= 1) {
            return String.format(Locale.ROOT, "%,.0f", v);
        }
        return BigDecimal.valueOf(v).round(new MathContext(2)).stripTrailingZeros().toPlainString();
    }
}
