/* The compiled decimal CSV reader's two kernels in C: the same grammar, the same arithmetic
 * and the same results, bit for bit, as the numba kernels of ingest/decimal_numba.py (the
 * grammar and why each value is exact: ingest/decimal_csv.py), except that a cell outside
 * the exact fast path is taken here (strtod_cell) where numba's kernel declines the file.
 * Built once per machine by
 * ingest/decimal_native.py with the system C compiler and loaded with ctypes, which
 * releases the GIL around each call; a process then pays a dlopen, not numba's import and
 * cache load.
 *
 * Accumulators are unsigned (wrap-around is defined); every value they could wrap on is
 * refused by a digit count first. No cell reader tests the end of `data`: the caller
 * checks that the file's last byte is '\n', every loop stops at a byte that is not a digit,
 * and a row is only started while a '\n' is still ahead. Compile without -ffast-math and
 * with -ffp-contract=off: one IEEE multiplication or division per value, nothing fused.
 */
#if defined(__FLT_EVAL_METHOD__) && __FLT_EVAL_METHOD__ != 0
#error "doubles must be evaluated as IEEE doubles (no x87 extended precision)"
#endif

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DIGITS 18        /* < 10^18 fits int64; %.12g writes at most 17 */
#define MAX_MANTISSA (UINT64_C(1) << 53)
#define BLOCK_ROWS 512       /* rows parsed into a row-major block before scattering */

/* Number of '\n' bytes in data[start:stop]. */
int64_t tl_count_newlines(const uint8_t *data, int64_t start, int64_t stop)
{
    int64_t count = 0;
    const uint8_t *p = data + start, *end = data + stop;
    while (p < end && (p = memchr(p, '\n', (size_t)(end - p))) != NULL) {
        count++;
        p++;
    }
    return count;
}

static inline double quiet_nan(int negative)
{
    union { uint64_t bits; double value; } nan = {UINT64_C(0x7ff8000000000000)};
    if (negative)
        nan.bits |= UINT64_C(0x8000000000000000);
    return nan.value;
}

/* A cell of the grammar outside the exact fast path (|e| > 22, a mantissa over 2^53: the
 * recorder's numerical zeros such as -2.96984659087e-18) by the C library's strtod, which
 * glibc and musl round correctly, as polars' and Arrow's parsers do, so the bits are theirs.
 * 0 (decline) when strtod does not take exactly the cell (a locale whose decimal point is
 * not '.'), or the value is not a normal finite double (subnormal, overflow: left to them). */
static int strtod_cell(const uint8_t *data, int64_t start, int64_t stop, double *out)
{
    char text[48];
    if (stop - start >= (int64_t)sizeof text)
        return 0;
    memcpy(text, data + start, (size_t)(stop - start));
    text[stop - start] = '\0';
    char *end = NULL;
    double value = strtod(text, &end);
    if (end != text + (stop - start) || !isnormal(value))
        return 0;
    *out = value;
    return 1;
}

/* The cell at *pos as a double; *pos moves past it; 0 when outside the grammar. */
static inline int float_cell(const uint8_t *data, int64_t *pos_io, const double *pow10,
                             double *out)
{
    int64_t cell = *pos_io, pos = *pos_io;
    int negative = data[pos] == '-';
    pos += negative;
    uint8_t first = data[pos];
    if (first == 'n' || first == 'i') {
        int ok = 0;
        if (first == 'n' && data[pos + 1] == 'a' && data[pos + 2] == 'n') {
            *out = quiet_nan(negative);
            ok = 1;
        } else if (first == 'i' && data[pos + 1] == 'n' && data[pos + 2] == 'f') {
            *out = negative ? -INFINITY : INFINITY;
            ok = 1;
        }
        *pos_io = ok ? pos + 3 : pos;
        return ok;
    }
    int64_t start = pos, exponent = 0;
    uint64_t mantissa = 0;
    int64_t digit = (int64_t)first - '0';
    while (0 <= digit && digit <= 9) {
        mantissa = mantissa * 10 + (uint64_t)digit;
        digit = (int64_t)data[++pos] - '0';
    }
    int64_t digits = pos - start;
    if (digit == '.' - '0') {
        int64_t fraction = ++pos;
        digit = (int64_t)data[pos] - '0';
        while (0 <= digit && digit <= 9) {
            mantissa = mantissa * 10 + (uint64_t)digit;
            digit = (int64_t)data[++pos] - '0';
        }
        exponent = fraction - pos;
        if (exponent == 0) {
            *pos_io = pos;
            return 0;
        }
        digits -= exponent;
    }
    *pos_io = pos;
    if (digits == 0 || digits > MAX_DIGITS)
        return 0;
    if (digit == 'e' - '0' || digit == 'E' - '0') {
        pos++;
        int64_t sign = 1;
        if (data[pos] == '+' || data[pos] == '-') {
            sign = 44 - (int64_t)data[pos];
            pos++;
        }
        int64_t exp_start = pos;
        uint64_t written = 0;
        digit = (int64_t)data[pos] - '0';
        while (0 <= digit && digit <= 9) {
            written = written * 10 + (uint64_t)digit;
            digit = (int64_t)data[++pos] - '0';
        }
        *pos_io = pos;
        if (pos == exp_start || pos - exp_start > 4)
            return 0;
        exponent += sign * (int64_t)written;
    }
    if (mantissa == 0) {
        *out = negative ? -0.0 : 0.0;
        return 1;
    }
    if (mantissa > MAX_MANTISSA || exponent > 22 || exponent < -22)
        return strtod_cell(data, cell, *pos_io, out); /* outside the exact fast path */
    double value = exponent >= 0 ? (double)mantissa * pow10[exponent]
                                 : (double)mantissa / pow10[-exponent];
    *out = negative ? -value : value;
    return 1;
}

/* The integer cell at *pos (1-18 digits); *pos moves past it; 0 when outside the grammar. */
static inline int int_cell(const uint8_t *data, int64_t *pos_io, int64_t *out)
{
    int64_t pos = *pos_io;
    int negative = data[pos] == '-';
    pos += negative;
    int64_t start = pos;
    uint64_t value = 0;
    int64_t digit = (int64_t)data[pos] - '0';
    while (0 <= digit && digit <= 9) {
        value = value * 10 + (uint64_t)digit;
        digit = (int64_t)data[++pos] - '0';
    }
    *pos_io = pos;
    *out = negative ? -(int64_t)value : (int64_t)value;
    return 0 < pos - start && pos - start <= MAX_DIGITS;
}

/* Fill rows first_row .. first_row + rows of floats[k * stride + row] (k-th float column)
 * and ints[k * stride + row] from the first `rows` lines of data[start:]; returns the
 * number of rows parsed (== rows when every cell is in the grammar), -1 when out of
 * memory. */
int64_t tl_parse_rows(const uint8_t *data, int64_t start, int64_t rows, int64_t first_row,
                      const uint8_t *is_int, int64_t ncols, double *floats, int64_t nfloat,
                      int64_t *ints, int64_t nint, int64_t stride, const double *pow10)
{
    double *float_block = malloc(sizeof(double) * BLOCK_ROWS * (nfloat > 0 ? nfloat : 1));
    int64_t *int_block = malloc(sizeof(int64_t) * BLOCK_ROWS * (nint > 0 ? nint : 1));
    if (float_block == NULL || int_block == NULL) {
        free(float_block);
        free(int_block);
        return -1;
    }
    int64_t pos = start, parsed = rows;
    for (int64_t first = 0; first < rows && parsed == rows; first += BLOCK_ROWS) {
        int64_t count = rows - first < BLOCK_ROWS ? rows - first : BLOCK_ROWS;
        for (int64_t r = 0; r < count; r++) {
            double *frow = float_block + r * nfloat;
            int64_t *irow = int_block + r * nint;
            for (int64_t col = 0, f = 0, i = 0; col < ncols; col++) {
                int ok = is_int[col] ? int_cell(data, &pos, &irow[i++])
                                     : float_cell(data, &pos, pow10, &frow[f++]);
                if (!ok || data[pos] != (col == ncols - 1 ? '\n' : ',')) {
                    parsed = first + r;
                    break;
                }
                pos++;
            }
            if (parsed != rows)
                break;
        }
        if (parsed != rows)
            break;
        for (int64_t f = 0; f < nfloat; f++)
            for (int64_t r = 0; r < count; r++)
                floats[f * stride + first_row + first + r] = float_block[r * nfloat + f];
        for (int64_t i = 0; i < nint; i++)
            for (int64_t r = 0; r < count; r++)
                ints[i * stride + first_row + first + r] = int_block[r * nint + i];
    }
    free(float_block);
    free(int_block);
    return parsed;
}
