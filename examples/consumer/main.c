/* Calls the installed libgka once: two tokens, one head, D = 1. */
#include <gka/gka.h>
#include <math.h>
#include <stdio.h>

int main(void) {
    const float x[2] = {0.0f, 1.0f}, sigma[1] = {1.0f};
    float y[2], lse[2];
    gka_call call = gka_call_init();
    call.shape = (gka_shape){1, 2, 1, 1};
    call.window = (gka_window){-1, -1};
    call.x = x, call.sigma = sigma, call.y = y, call.lse = lse;
    if (gka_run_forward(&call) != GKA_OK) {
        fprintf(stderr, "gka_run_forward: %s\n", gka_last_error());
        return 1;
    }
    /* y_0 = e^-1/2 / (1 + e^-1/2) (docs/spec.md with s_01 = -1/2). */
    const double expected = exp(-0.5) / (1 + exp(-0.5));
    printf("consumer: family %s, y[0] = %.6f (expected %.6f)\n", gka_cpu_family(), y[0], expected);
    return fabs(y[0] - expected) < 1e-6 ? 0 : 1;
}
