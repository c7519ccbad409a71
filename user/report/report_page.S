/* SPDX-License-Identifier: GPL-2.0 */
/* The HTML report's page (user/report/report.html), as one NUL-terminated string: report_html.c
 * fills its data in. */
	.section .rodata
	.global heaptap_report_page
	.type heaptap_report_page, @object
heaptap_report_page:
	.incbin PAGE
	.byte 0
	.size heaptap_report_page, . - heaptap_report_page
	/* No executable stack is needed. */
	.section .note.GNU-stack, "", @progbits
